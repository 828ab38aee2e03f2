"""Pipeline parallelism (GPipe): a four-layer MLP whose layers run on separate PEs, micro-batches
flowing through them.

    h_0 = x;  h_{l+1}[n, o] = clip((sum_i h_l[n, i] * w[l, i, o]) >> SHIFT, 0, 127)

int8 activations and weights, int32 accumulation, requantized to int8 between layers (a ReLU
and a clip). `hw.pipeline` splits the batch into micro-batches and gives each of K stages
LAYERS / K consecutive layers; stage k runs on PE k of a ring and sends each micro-batch's
activations to PE k + 1 while it starts on the next micro-batch.

`build(stages, microbatches, batch, width)` makes the kernel (stages = 1: one PE runs all the
layers, micro-batch by micro-batch); benchmarks/pipeline.py measures 1, 2 and 4 stages at
1 to 64 micro-batches.
"""

import numpy as np

import hwgen as hw
from hwgen import int8, int32

LAYERS, SHIFT = 4, 7
LINK = hw.LinkConfig(words_per_cycle=4, latency=8)
STAGES, MICROBATCHES, BATCH, WIDTH = 4, 4, 32, 32


def build(stages=STAGES, microbatches=MICROBATCHES, batch=BATCH, width=WIDTH, lanes=8, link=LINK):
    """The MLP on `stages` PEs of a ring (LAYERS must be a multiple), `batch` rows of `width`
    features in `microbatches` micro-batches, each layer's sum on `lanes` lanes, over links
    of `link` (4 int8 words a cycle, as the DRAM channel's beat)."""
    mesh = hw.Mesh((stages,), ("stage",), topology="ring")
    per = LAYERS // stages
    rows = batch // microbatches

    def layer(w, k):
        def apply(h):
            acc = lambda n, o: hw.sum(width, lambda i: h[n, i].astype(int32) * w[k, i, o])  # noqa: E731
            return hw.map(h.shape, lambda n, o: hw.minimum(hw.maximum(acc(n, o) >> SHIFT, 0), 127).astype(int8))

        return apply

    def stage(w, s):
        def apply(h):
            for k in range(s * per, (s + 1) * per):
                h = layer(w, k)(h)
            return h

        return apply

    @hw.kernel(mesh=mesh, link=link, tile={"n": rows, "o": 16}, par={"i": lanes})
    def pipeline_mlp(x: hw.Array[int8, batch, width], w: hw.Array[int8, LAYERS, width, width]):
        return hw.pipeline([stage(w, s) for s in range(stages)], x, axis="stage", microbatches=microbatches)

    return pipeline_mlp


pipeline_mlp = build()


def inputs(seed=0, batch=BATCH, width=WIDTH):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 128, (batch, width)).astype(np.int8)
    w = rng.integers(-32, 32, (LAYERS, width, width)).astype(np.int8)
    return x, w


def reference(x, w):
    """Plain numpy: each layer in int64, shifted, clipped to 0 .. 127."""
    h = x.astype(np.int64)
    for k in range(LAYERS):
        h = np.clip((h @ w[k].astype(np.int64)) >> SHIFT, 0, 127)
    return h.astype(np.int8)
