"""The pipeline's stages, one module each: ``genlab <stage>`` runs ``genlab.stages.<stage>.run``.

A stage reads its inputs, calls the library and writes its artifacts (write to a temp name, then
rename: :mod:`genlab.io`); it is the only layer besides :mod:`genlab.cli` that touches disk. The
CLI imports a stage's module by name when it runs it, so each stage's code dependencies are the
import closure of its own module (:mod:`genlab.workflow.code_deps`), not of every stage.
"""
