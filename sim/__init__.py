"""hwgen's simulation harness (installed as the package `hwgen_sim`).

- dram.v: the DRAM model in Verilog (latency, jitter, words per beat, load/dump files)
- harness.py: the Verilog top that joins a kernel and the DRAM model, and the DRAM image
- testbench.py: the one generic cocotb test (start, wait for done, dump memory)
- runner.py: a small wrapper over cocotb's Verilator runner, with a build cache
"""
