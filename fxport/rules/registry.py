"""Rule sets: collecting rules (built-ins, control-flow conversions, files, entry points,
objects), resolving conflicts, and applying them in the pipeline.

Example::

    >>> import fxport
    >>> ruleset = fxport.rules.resolve(disable=["aten::erfinv"], opset=18, device="cpu")
    >>> "aten::erfinv" in ruleset.names(), "aten::lgamma" in ruleset.names()
    (False, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import sys
import types
from typing import Any, Callable, Iterable, Iterator, Sequence

import onnx

from fxport.errors import RuleError, SourceLocation
from fxport.common.frames import user_location_from_exception
from fxport.common.provenance import EXPORTER_FX_NODE_KEY, EXPORTER_STACK_KEY, ONNX_RULE_KEY, fx_node_name, metadata, rule_of_node, set_metadata
from fxport.report.result import AppliedRewrite, iter_graphs, iter_nodes
from fxport.rules.base import TIERS, Rule, rules_of
from fxport.rules.controlflow import control_flow_names, control_flow_rules
from fxport.rules.graph import GraphRule, apply_graph_rules, location_from_stack_trace
from fxport.rules.op import OpRule
from fxport.rules.passes import apply_graph_passes
from fxport.rules.patching import PatchRule, apply_patches

ENTRY_POINT_GROUP = "fxport.rules"
#: ONNX node metadata key naming the rule that produced the node (:mod:`fxport.common.provenance`).
PROVENANCE_KEY = ONNX_RULE_KEY


@dataclasses.dataclass
class RuleSet:
    """The enabled rules of one conversion, one winner per (tier, target).

    Attributes:
        rules: the enabled, in-scope winners, in tier order (patch, control-flow, pass, graph, op,
            decision).
        shadowed: rules a higher-priority rule overrode.
        skipped: rules out of scope, with why (``{name: reason}``).
        disabled: the names the caller disabled.
    """

    rules: list[Rule]
    shadowed: list[Rule] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    disabled: frozenset[str] = frozenset()

    def names(self) -> list[str]:
        return [rule.name for rule in self.rules]

    def of_tier(self, tier: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.tier == tier]

    def get(self, name: str) -> Rule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(name)

    # --- the pipeline's hooks ------------------------------------------------------------
    def patches_applied(self, records: list[AppliedRewrite],
                        only: Iterable[str] | None = None) -> contextlib.AbstractContextManager:
        """Context manager installing the patch rules for the capture (see ``apply_patches``);
        ``only``: the names of the rules to install (default: all)."""
        names = None if only is None else set(only)
        return apply_patches([r for r in self.of_tier("patch") if names is None or r.name in names], records)

    @property
    def disabled_control_flow(self) -> frozenset[str]:
        """The control-flow conversions disabled by name (for ``convert_control_flow(disabled=)``)."""
        return frozenset(self.disabled & set(control_flow_names()))

    def apply_graph_rules(self, exported: Any, records: list[AppliedRewrite], *,
                          control_flow: bool = True) -> Any:
        """Rewrite the ExportedProgram in every graph (top level, cond branches, loop and scan
        bodies): the graph passes first (highest priority first), then the graph rules; returns it.

        ``control_flow`` says whether the capture converted control flow (passes read it as
        ``context.control_flow``).
        """
        passes, graph_rules = self.of_tier("pass"), self.of_tier("graph")
        if passes:
            apply_graph_passes(exported, passes, records, control_flow=control_flow)
        return apply_graph_rules(exported, graph_rules, records) if graph_rules else exported

    def translation_table(self) -> dict:
        """``{OpOverload: function}`` for ``torch.onnx.export(custom_translation_table=...)``."""
        return {rule.op: rule.function for rule in self.of_tier("op")}

    def record_op_rules_fired(self, model: onnx.ModelProto,
                              records: list[AppliedRewrite]) -> None:
        """Stamp ONNX nodes made by op (and graph) rules with ``fxport.rule`` metadata and add
        one AppliedRewrite per translated FX node to ``records``."""
        stamp_provenance(model, self.of_tier("op"), self.of_tier("graph"), records)


# --- resolving ---------------------------------------------------------------------------

def resolve(
    rules: Any = None,
    *,
    disable: Iterable[str] = (),
    opset: int | None = None,
    device: str | None = None,
    builtins: bool = True,
    entry_points: bool = True,
) -> RuleSet:
    """Collect, filter and order the rules of one conversion.

    Args:
        rules: user rules: a Rule, a decorated function/class, a module, a path to a ``.py``
            rule file, or a list of those.
        disable: rule names to drop (unknown names are a RuleError, so typos do not pass).
        opset, device: drop rules whose scope excludes them (reported in ``skipped``).
        builtins: include the rules in ``fxport.rewrites`` and the control-flow conversions.
        entry_points: include rules from installed packages (entry-point group ``fxport.rules``).

    Raises:
        RuleError: a rule file fails to load, two rules share a name, a disabled name is
            unknown, or two enabled rules claim one target at the same priority.
    """
    collected: list[Rule] = []
    if builtins:
        collected += builtin_rules()
        taken = {rule.name for rule in collected}  # a conversion that is a built-in pass is listed once
        collected += [rule for rule in control_flow_rules() if rule.name not in taken]
    if entry_points:
        collected += entry_point_rules()
    collected += collect(rules)
    collected = _unique(collected)
    _check_names(collected)
    disabled = set(disable)
    unknown = disabled - {rule.name for rule in collected}
    if unknown:
        raise RuleError(f"cannot disable unknown rule(s): {', '.join(sorted(unknown))}",
                        hint="`fxport rules` lists the rule names")
    enabled, skipped = [], {}
    for rule in collected:
        if rule.name in disabled:
            continue
        why = rule.scope.why_not(opset=opset, device=device)
        if why:
            skipped[rule.name] = why
        else:
            enabled.append(rule)
    winners, shadowed = _pick_winners(enabled)
    winners.sort(key=lambda r: TIERS.index(r.tier) if r.tier in TIERS else len(TIERS))
    return RuleSet(winners, shadowed, skipped, frozenset(disabled))


def collect(rules: Any) -> list[Rule]:
    """The rules in ``rules`` (see :func:`resolve`), in order."""
    if rules is None:
        return []
    if isinstance(rules, (str, os.PathLike)):
        return rules_in_module(load_rule_file(rules))
    if isinstance(rules, types.ModuleType):
        return rules_in_module(rules)
    found = rules_of(rules)
    if found:
        return found
    if isinstance(rules, RuleSet):
        return list(rules.rules)
    if isinstance(rules, Iterable):
        return [rule for item in rules for rule in collect(item)]
    raise RuleError(f"not a rule: {rules!r}",
                    hint="pass functions decorated with @fxport.onnx_op/@fxport.patch/"
                         "@fxport.graph_rule, modules, or rule-file paths")


def rules_in_module(module: types.ModuleType) -> list[Rule]:
    """Every rule defined at the top level of ``module`` (decorated objects or Rule objects)."""
    found = []
    for value in list(vars(module).values()):
        found += rules_of(value)
    return _unique(found)


def load_rule_file(path: str | os.PathLike) -> types.ModuleType:
    """Import a user rule file; RuleError (with the file:line at fault) when it fails."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise RuleError(f"rule file {path} does not exist", hint="pass an existing .py file")
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    module_name = f"fxport_user_rules_{digest}_{os.path.splitext(os.path.basename(path))[0]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise RuleError(f"rule file {path} is not a Python file", hint="pass a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    directory = os.path.dirname(path)
    sys.path.insert(0, directory)  # a rule file may import modules next to it
    try:
        spec.loader.exec_module(module)
    except RuleError:
        del sys.modules[module_name]
        raise
    except Exception as err:  # noqa: BLE001 - anything the user's file raises
        del sys.modules[module_name]
        where = user_location_from_exception(err) or SourceLocation(path, 1)
        detail = err.msg if isinstance(err, SyntaxError) else str(err)
        raise RuleError(f"rule file {os.path.basename(path)} failed to load: "
                        f"{type(err).__name__}: {detail}", where=where,
                        hint="fix the rule file (run it with python to see the traceback)") from err
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)
    return module


#: Libraries whose custom ops or functions built-in rules translate or patch once the library is
#: imported (they do not exist before): the built-ins are collected again when one of them
#: appears, so a process that used fxport before importing transformers still gets the MoE rule
#: and the generate() rule.
OPTIONAL_OP_LIBRARIES = ("transformers", "torchvision")

_builtin_cache: dict[frozenset, list[Rule]] = {}


def builtin_rules() -> list[Rule]:
    """The rules in the ``fxport.rewrites`` package (the repository's ``rewrites/`` folder),
    loaded once per set of loaded optional libraries."""
    loaded = frozenset(name for name in OPTIONAL_OP_LIBRARIES if name in sys.modules)
    if loaded not in _builtin_cache:
        import fxport.rewrites

        refresh = bool(_builtin_cache)  # modules imported before the library appeared run again
        found: list[Rule] = []
        for info in sorted(pkgutil.iter_modules(fxport.rewrites.__path__), key=lambda m: m.name):
            if info.name.startswith("_") or info.ispkg:
                continue
            module = importlib.import_module(f"fxport.rewrites.{info.name}")
            found += rules_in_module(importlib.reload(module) if refresh else module)
        _builtin_cache.clear()
        _builtin_cache[loaded] = found
    return list(_builtin_cache[loaded])


def entry_point_rules() -> list[Rule]:
    """Rules from installed packages: each entry point of group ``fxport.rules`` names a module
    (its rules are collected), a Rule or decorated object, or a callable returning those."""
    found: list[Rule] = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = entry.load()
        except Exception as err:  # noqa: BLE001
            raise RuleError(f"rule entry point {entry.name!r} ({entry.value}) failed to load: "
                            f"{type(err).__name__}: {err}",
                            hint=f"fix or uninstall the package providing it") from err
        if callable(value) and not rules_of(value) and not isinstance(value, type):
            value = value()
        found += collect(value)
    return found


def _unique(rules: list[Rule]) -> list[Rule]:
    seen, unique = set(), []
    for rule in rules:
        if id(rule) not in seen:
            seen.add(id(rule))
            unique.append(rule)
    return unique


def _check_names(rules: list[Rule]) -> None:
    by_name: dict[str, Rule] = {}
    for rule in rules:
        other = by_name.setdefault(rule.name, rule)
        if other is not rule:
            raise RuleError(
                f"two rules are named {rule.name!r} ({_site(other)} and {_site(rule)})",
                hint="pass name= to one of them",
            )


def _pick_winners(rules: list[Rule]) -> tuple[list[Rule], list[Rule]]:
    """One rule per (tier, target): the highest priority; a tie at the top is a RuleError."""
    by_key: dict[tuple[str, str], list[Rule]] = {}
    for rule in rules:
        by_key.setdefault(rule.key, []).append(rule)
    winners, shadowed = [], []
    for (tier, target), claimants in by_key.items():
        claimants.sort(key=lambda r: r.priority, reverse=True)
        if len(claimants) > 1 and claimants[0].priority == claimants[1].priority:
            first, second = claimants[0], claimants[1]
            raise RuleError(
                f"{tier} rules {first.name!r} ({_site(first)}) and {second.name!r} "
                f"({_site(second)}) both claim {target} at priority {first.priority}",
                hint="give one a higher priority= or --disable one of them",
            )
        winners.append(claimants[0])
        shadowed += claimants[1:]
    return winners, shadowed


def _site(rule: Rule) -> str:
    return str(rule.defined_at) if rule.defined_at else "unknown file"


# --- provenance --------------------------------------------------------------------------

def stamp_provenance(model: onnx.ModelProto, op_rules: Sequence[OpRule],
                     graph_rules: Sequence[GraphRule], records: list[AppliedRewrite]) -> None:
    """Mark ONNX nodes produced by op rules (and graph-rule replacement nodes) with
    ``metadata_props["fxport.rule"]``; one AppliedRewrite per FX node an op rule translated.

    The exporter records each ONNX node's FX origin in ``pkg.torch.onnx.fx_node``
    (``%name : ... = call_function[target=torch.ops.aten.erfinv.default](...)``).
    """
    targets = {f"[target={rule.fx_target}]": rule for rule in op_rules}
    fired: dict[tuple[str, str], tuple[OpRule, str | None]] = {}
    for node in iter_nodes(model.graph):
        props = metadata(node)
        fx_node = props.get(EXPORTER_FX_NODE_KEY, "")
        rule = next((r for key, r in targets.items() if key in fx_node), None)
        if rule is None:
            continue
        set_metadata(node, ONNX_RULE_KEY, rule.name)
        fx_name = fx_node_name(props)
        fired.setdefault((rule.name, fx_name), (rule, props.get(EXPORTER_STACK_KEY)))
    for (_, fx_name), (rule, stack) in fired.items():
        records.append(AppliedRewrite(
            rule=rule.name, tier="op", location=location_from_stack_trace(stack),
            detail=f"translated {fx_name.lstrip('%')} ({rule.target}) with {rule.name}"
                   + (f": {rule.doc}" if rule.doc else ""),  # why: a plain .max() is rewritten to keep NaN
            data={"op": rule.target, "fx_node": fx_name.lstrip("%")},
        ))
    _stamp_graph_rule_nodes(model, records)


def _stamp_graph_rule_nodes(model: onnx.ModelProto, records: list[AppliedRewrite]) -> None:
    """Stamp the ONNX nodes lowered from FX nodes graph rules and passes made (``new_nodes``),
    looking in the ONNX graph lowered from the FX graph the record names: the main graph, or the
    If/Loop body named after the subgraph (``true_graph_0``), so equal names elsewhere are left alone.
    Matching is by FX node name, so a node the exporter renames while re-tracing is not stamped."""
    made_by: dict[tuple[str | None, str], str] = {}
    for record in records:
        if record.tier in ("graph", "pass"):
            graph = record.data.get("graph")
            for name in record.data.get("new_nodes", []):
                made_by[(graph.rpartition(".")[2] if graph else None, f"%{name}")] = record.rule
    if not made_by:
        return
    subgraph_names = {graph for graph, _ in made_by if graph}
    for graph in iter_graphs(model.graph):
        # the exporter names a branch after its FX subgraph, a Loop body "<body>_loop_body"
        graph_name = None if graph is model.graph else next(
            (name for name in subgraph_names if graph.name == name or graph.name.startswith(f"{name}_")), "")
        for node in graph.node:
            fx_name = fx_node_name(metadata(node))
            if (graph_name, fx_name) in made_by:
                set_metadata(node, ONNX_RULE_KEY, made_by[(graph_name, fx_name)])
