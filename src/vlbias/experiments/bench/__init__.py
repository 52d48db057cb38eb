"""Benchmarks (``scripts/bench_*.py``): each module times vlbias's implementation of one step against the
straightforward or the authors' way of doing the same work, in the same run, and checks that both agree. What they
share (clocks, timing with the GPU's queue drained, interleaved rounds, the machine's line) is in
:mod:`vlbias.experiments.bench.timing`."""
