"""The front end: what a user's kernel is written in, and how it becomes pattern IR.

Tracing runs the kernel's Python lambdas once on symbolic values and records the patterns
they call as the pattern IR (hwgen/ir.py): context.py (the trace being recorded), scalars.py,
arrays.py and patterns.py (hw.map, hw.sum, ...). Around it: dtypes.py (integer dtypes with
numpy's rules), fixedpoint.py (hw.fixed), mathfuncs.py (hw.exp, hw.log, ...), signature.py
(kernel signatures: hw.Array annotations, argument checks) and program.py (a traced kernel).
Nothing here depends on the back end (passes/, hw/).
"""
