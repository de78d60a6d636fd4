"""Ragged pipelines held out from the autoscheduler: written after its ragged rules (token-flattened
products, attention) were, and named by nothing under ``ragsched/`` (tests/structure checks), so that the
rules' figures on them measure work nobody tuned for. ``python -m benchmarks.ragged --parts ffn`` times
them apart from attention, the encoder and the linear layer."""

NAMES = ("ffn",)
