"""The cycle model of a pipeline kernel (mesh/pipeline_hw.py, hw/stage.py): exact with fixed
DRAM latency.

Cycle 0 is the mesh's `start`. Stage k starts micro-batch m in cycle `go` (its Top's start
pulse); the Top is busy the c_k cycles after it (c_k: the single-PE prediction, model.predict)
and its done is first high in e = go + c_k + 1, where the stage sees it. With
Lm the DRAM latency, L the link's, B_k the link beats of one of stage k's output slots
(dst_words / link words a cycle):

    go_k(m)   max(1, e_k(m-1) + 1, got_k(m))   (got_k: the cycle its input slot m is written
                                                whole and counted; the first stage needs none)
    T_k(m)    max(e_k(m) + Lm + 2, T_k(m-1) + B_k)
              the first beat of slot m enters the link: the finish is seen in e + 1, where the
              first read is requested; its beat reaches the send FIFO Lm cycles later and the
              link a cycle after that. Beats follow one a cycle (the FIFO covers the read's
              round trip, so a slot's beats run on from the previous slot's)
    got_k+1(m) T_k(m) + B_k - 1 + L + 4
              the last beat crosses the link (L + 1), shows on the receiver's FIFO a cycle
              later, fills a DRAM beat written the next cycle and counted the one after

The mesh's cycles are e_last(M-1) + 2: the stage's done rises two cycles after its last
micro-batch's, and the mesh top counts until it sees every PE done.

`bubble`: (K - 1) / (M + K - 1), GPipe's idle fraction for K stages of equal length;
`roofline`: M times the slowest stage's c_k, the time the busiest PE needs.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE = 1  # the Top's done is first high the cycle after its c_k busy cycles
SEND = 2  # a finished slot's first read request (1) and the FIFO-to-link cycle (1)
RECEIVE = 4  # link register (1) + receiver FIFO output (1) + DRAM write (1) + count (1)
FINISH = 2  # the last micro-batch's done -> the stage's done -> the mesh top's


@dataclass(frozen=True)
class PipelinePrediction:
    cycles: int
    roofline: int
    stage_cycles: list  # c_k: one micro-batch on stage k
    transfer_cycles: list  # B_k + the link's and DRAM's latency: one slot from stage k to k + 1
    bubble: float
    starts: list  # go_k(m) per stage, per micro-batch
    finishes: list  # e_k(m)


def predict(pp, compiled, dram, link) -> PipelinePrediction:
    """The model of the module docstring for plan `pp` (PipelinePlan) and its compiled stages."""
    from ..model import predict as predict_one

    c = [predict_one(cp, dram).cycles for cp in compiled]
    K, M = len(c), pp.stages[0].microbatches
    beats = [s.dst_words // link.words_per_cycle for s in pp.stages]
    starts, finishes = [], []
    arrive = [1] * M  # the first stage's input is there from the start
    for k in range(K):
        go, end = [], []
        for m in range(M):
            g = max(1, end[-1] + 1 if end else 1, arrive[m])
            go.append(g)
            end.append(g + c[k] + DONE)
        starts.append(go)
        finishes.append(end)
        if k < K - 1:
            first, arrive = None, []
            for m in range(M):
                ready = end[m] + dram.latency + SEND
                first = ready if first is None else max(ready, first + beats[k])
                arrive.append(first + beats[k] - 1 + link.latency + RECEIVE)
    transfer = [beats[k] + dram.latency + SEND + link.latency + RECEIVE - 1 for k in range(K - 1)]
    return PipelinePrediction(
        cycles=finishes[-1][-1] + FINISH,
        roofline=M * max(c),
        stage_cycles=c,
        transfer_cycles=transfer,
        bubble=(K - 1) / (M + K - 1),
        starts=starts,
        finishes=finishes,
    )
