"""Protected paths: what an agent must not destroy, checked before and after it acts.

Deliberately empty of imports: ``forge guard`` and ``forge hook pre-tool-use``
run on every tool call of an agent, so their modules (``_spec``, ``_shell``)
import only the standard library's cheapest parts. Import the concepts from
their modules.
"""
