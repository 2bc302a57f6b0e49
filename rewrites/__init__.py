"""fxport's built-in rules, installed as the package ``fxport.rewrites``.

Each public module here is a rule file like a user's: it imports ``fxport`` and uses only its
public API (``fxport.onnx_op``, ``fxport.patch``, ``fxport.graph_rule``,
``fxport.rules.graph_pass``, …), so the modules are the examples to copy. Every rule defined at a
module's top level is collected by :func:`fxport.rules.builtin_rules`; modules starting with
``_`` hold shared helpers. docs/rule-catalogue.md lists the rules.
"""
