"""Halide versions of the held-out pipelines (``pipelines/held_out/``), one module per app, each with
``app(shapes) -> halide_apps._App``: the algorithm and the app's CPU hand schedule, written here from
Halide's apps/ folder."""
