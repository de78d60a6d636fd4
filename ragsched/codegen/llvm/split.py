"""A module's outlined loops in a second module, so that LLVM optimises the two at once.

LLVM's optimiser is most of a large pipeline's compile (1.5 s of a tuned image pyramid's 2 s of LLVM),
and the loops outlined into functions of their own are most of that: the bodies of parallel loops
(``K.parN.body`` and the ``K.parN.loop`` it calls, ``parallel.py``), reached from the kernel only
through their address handed to ``GOMP_parallel``, and the kernel's outermost serial loops
(``K.serN.loop``, called once each). The text of the emitted module (``emit.py``'s: no metadata, one
``define`` block per function) is cut in two: the second part holds some of those functions, copies of
the internal helpers they call (``scratch.get``) and of the constant tables they read, and declarations
of the rest; the kernel's part declares the functions it gave away. The scratch sites (mutable globals
both parts use) stay defined in the first part, made linkable, and are declared in the second. Each
part is then made into machine code on its own thread, and the two objects are linked into one JIT
library, which resolves the calls between them (``load.LoadedObject``; with the small code model: under
the large one, calls through the second object's global offset table crashed MCJIT, which loaded them
before, and the parts were linked into one module first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_DEFINE = re.compile(r'^define (?:internal )?.*?@"([^"]+)"\((.*)$')
_GLOBAL = re.compile(r'^@"([^"]+)" = internal (global|constant) (.*)$')
_REF = re.compile(r'@"([^"]+)"')
_OUTLINED = re.compile(r"^(.*\.(?:par|ser)\d+)\.(body|loop)$")

#: the least work (``_Function.cost``) the second part must get to pay for a second module's fixed costs
#: (parsing both, the passes' setup, the link): about 10 ms in all; 1000 is about 70 ms of optimisation
MIN_COST = 1000


@dataclass(frozen=True)
class _Function:
    name: str
    text: str  # from "define" to its closing brace
    internal: bool

    @cached_property
    def cost(self) -> int:
        """The optimiser's time, roughly, in lines of scalar IR: a line with a vector type costs 10 (fitted
        to the time each part of two tuned pipelines took alone, within 10%), and a loop (a ``phi``) of an
        outlined function 40 more: LLVM vectorizes such a loop itself (a default schedule's: three loops
        made of one) and its lines cost 2-3 times the kernel's straight-line ones (regions, closures),
        whose few loops (freeing scratch) it does not. Without that term the parts of an image pyramid's
        default schedule, even by this count, took 0.2 and 0.6 s (LLVM 0.94 s; with it 0.69 s). A function
        left unoptimised (``optnone``: the kernel's, where it has no loop) costs an eighth of its lines."""
        loops = self.text.count(" phi ") if _OUTLINED.match(self.name) else 0
        cost = self.text.count("\n") + 1 + 10 * self.text.count(" x ") + 40 * loops
        return cost // 8 if " optnone" in self.text[: self.text.find("\n")] else cost

    @cached_property
    def refs(self) -> frozenset[str]:
        return frozenset(_REF.findall(self.text)) - {self.name}

    def declaration(self) -> str:
        """``declare`` with the definition's signature (attributes after the parameters dropped)."""
        head = self.text.split("\n", 1)[0]
        head = head.replace("define internal ", "define ", 1)[len("define "):]
        return "declare " + head[: _close_paren(head) + 1]


def _close_paren(head: str) -> int:
    """Index of the parenthesis that closes the parameter list of a ``define`` line."""
    depth = 0
    start = head.index('"(') + 1
    for i in range(start, len(head)):
        depth += {"(": 1, ")": -1}.get(head[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced parameter list")


def _parse(text: str) -> tuple[list[str], dict[str, _Function], list[str]]:
    """(the lines outside functions, the functions by name, the order of the module's top-level items:
    a function's name or "" for the next line outside)."""
    outside, functions, order = [], {}, []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        if m is None:
            outside.append(lines[i])
            order.append("")
            i += 1
            continue
        j = i
        while lines[j] != "}":
            j += 1
        name = m.group(1)
        functions[name] = _Function(name, "\n".join(lines[i: j + 1]), lines[i].startswith("define internal "))
        order.append(name)
        i = j + 1
    return outside, functions, order


def split_outlined(text: str, min_cost: int | None = None) -> tuple[str, str] | None:
    """(the kernel's part, the part with outlined loops) of the module ``text``, the second holding about
    half the work, or None where the outlined loops are too small a share to be worth a second module."""
    outside, functions, order = _parse(text)
    groups: dict[str, list[str]] = {}
    for name in functions:
        m = _OUTLINED.match(name)
        if m:
            groups.setdefault(m.group(1), []).append(name)
    total = sum(f.cost for f in functions.values())
    moved: set[str] = set()
    weight = 0
    for stem in sorted(groups, key=lambda s: -sum(functions[n].cost for n in groups[s])):
        size = sum(functions[n].cost for n in groups[stem])
        if weight + size <= total / 2 or not moved:
            moved.update(groups[stem])
            weight += size
    if weight < (MIN_COST if min_cost is None else min_cost) or not moved:
        return None
    # what the moved functions reach: internal helpers are copied (then the optimiser inlines and
    # specialises them as before), anything else is declared
    copied: set[str] = set()
    frontier = [r for n in moved for r in functions[n].refs]
    while frontier:
        r = frontier.pop()
        if r in functions and r not in moved and r not in copied and functions[r].internal \
                and not _OUTLINED.match(r):
            copied.add(r)
            frontier.extend(functions[r].refs)
    reached = {r for n in moved | copied for r in functions[n].refs}
    entries = {r for n in functions if n not in moved for r in functions[n].refs} & moved
    shared_globals = set()
    for line in outside:
        g = _GLOBAL.match(line)
        if g and g.group(2) == "global" and g.group(1) in reached:
            shared_globals.add(g.group(1))

    first, second = [], []
    outside_lines = iter(outside)
    for item in order:
        if item == "":
            line = next(outside_lines)
            g = _GLOBAL.match(line)
            if g and g.group(1) in shared_globals:  # one definition, linkable; declared in the second part
                first.append(f'@"{g.group(1)}" = global {g.group(3)}')
                second.append(f'@"{g.group(1)}" = external global {_global_type(g.group(3))}')
            else:
                first.append(line)
                second.append(line)
            continue
        f = functions[item]
        if item in moved:
            if item in entries:  # called or passed on by the kernel's part: linkable there, declared here
                first.append(f.declaration())
                second.append(f.text.replace("define internal ", "define ", 1))
            else:
                second.append(f.text)
        else:
            first.append(f.text)
            if item in copied:
                second.append(f.text)
            elif item in reached:
                second.append(f.declaration())
    return "\n".join(first), "\n".join(second)


def _global_type(rest: str) -> str:
    """The type of a global from what follows ``global`` in its definition (type, initialiser)."""
    depth = 0
    for i, ch in enumerate(rest):
        depth += {"[": 1, "{": 1, "<": 1, "]": -1, "}": -1, ">": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            return rest[:i]
    return rest
