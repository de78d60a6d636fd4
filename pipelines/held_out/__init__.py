"""The held-out suite: pipelines written from Halide's apps that no rule, search space or default of the
autoscheduler was written beside. Nothing under ``ragsched/`` may name them (tests/structure checks);
``make bench`` reports them apart from the bundled pipelines. Same file format as ``pipelines/*.py``."""

NAMES = ("stencil_chain", "max_filter", "iir_blur", "interpolate", "nl_means", "hist_eq", "resize",
         "depthwise_conv", "linear_blur")
