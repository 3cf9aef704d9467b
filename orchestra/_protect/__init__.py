"""Protected paths: what an agent must not destroy, checked before and after it acts.

Deliberately empty of imports: ``forge guard`` and ``forge hook pre-tool-use``
run on every tool call of an agent, so their modules (``_spec``, ``_config``,
``_shell`` and the ``_sh*`` modules behind it) import only the standard
library's cheapest parts. The loop's side (``_manifest``, ``_diff``,
``_restore``, ``_check``) may import anything. Import the concepts from their
modules.
"""
