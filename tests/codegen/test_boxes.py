"""Bounds inference on the loop nest (``codegen.boxes``) and the statement rewrites placement makes
(``codegen.stmt_paths``): the boxes each loop touches are remembered per statement, so a rewrite must
keep the untouched statements as they were, and a remembered box must not be reused where enclosing
loops narrow it differently."""

from __future__ import annotations

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import boxes, ir
from ragsched.codegen.stmt_paths import replace_loop_body

I64 = T.INDEX


def _var(name: str) -> E.Var:
    return E.Var(name, I64)


def _read(name: str, *args) -> ir.Provide:
    return ir.Provide("out", (), E.FuncRef(name, tuple(args), T.float32))


def _loop(var: str, extent: int, body: ir.Stmt) -> ir.For:
    return ir.For(var, E.const(0, I64), E.const(extent, I64), ir.ForKind.SERIAL, body)


def _ends(box) -> list[tuple[int, int]]:
    return [(iv.lo.value, iv.hi.value) for iv in box]


def test_replacing_a_loop_body_keeps_the_other_statements_the_same_objects():
    left = _loop("x", 4, _read("f", _var("x")))
    right = _loop("y", 4, _loop("z", 2, _read("g", _var("y"), _var("z"))))
    tree = ir.Block((left, right))
    out = replace_loop_body(tree, "z", lambda body: ir.block(_read("h", _var("z")), body))
    assert out.stmts[0] is left  # off the path to loop z
    assert out.stmts[1] is not right and out.stmts[1].body.body.stmts[1] is right.body.body
    assert boxes.box_touched(out, "h") is not None and boxes.box_touched(tree, "h") is None
    assert replace_loop_body(tree, "w", lambda body: body) is tree  # no such loop: nothing rebuilt


def test_a_loop_shared_by_two_nests_is_narrowed_by_each_nests_own_ranges():
    # the same inner statement under y in [0, 4] and y in [0, 7]; its guard narrows y, so what it reads
    # depends on the enclosing loop's range, and the box remembered for one nest must not serve the other
    inner = _loop("x", 10, ir.IfThenElse(E.le(_var("y"), _var("x")), _read("f", _var("y"))))
    tree = ir.Block((_loop("y", 5, inner), _loop("y", 8, inner)))
    boxes._LOOP_BOXES.clear()
    assert _ends(boxes.box_touched(tree.stmts[0], "f")) == [(0, 4)]
    assert _ends(boxes.box_touched(tree, "f")) == [(0, 7)]
    assert _ends(boxes.box_touched(tree.stmts[1], "f")) == [(0, 7)]
    assert _ends(boxes.box_touched(tree.stmts[0], "f")) == [(0, 4)]


def test_remembered_boxes_equal_boxes_inferred_afresh():
    inner = _loop("x", 6, ir.Block((_read("f", E.add(_var("x"), _var("y"))),
                                   ir.IfThenElse(E.le(_var("x"), E.const(2, I64)), _read("f", E.const(-1, I64))))))
    tree = _loop("y", 3, ir.LetStmt("t", E.add(_var("y"), E.const(1, I64)), inner))
    first = boxes.box_touched(tree, "f")
    again = boxes.box_touched(tree, "f")
    boxes._LOOP_BOXES.clear()
    assert first == again == boxes.box_touched(tree, "f")
    assert _ends(first) == [(-1, 7)]
