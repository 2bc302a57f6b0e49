"""The ``fxport`` command line: a thin layer over :func:`fxport.convert` and friends.

Exit codes: 0 converted and verified, 1 conversion or verification failed, 2 usage error.

Size: over 400 lines because typer declares every command's options in its signature here,
beside the output they print; the work itself is in the core (choices in fxport.engine.choices).

Example::

    $ fxport convert examples/gated_mlp.py:GatedMLP -o gated.onnx
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import json
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from fxport import __version__
from fxport.engine import choices
from fxport.errors import ConversionError, OutputWriteError, UsageError
from fxport.common.frames import exception_chain
from fxport.common.shapes import shape_text

# Start-up budget (``fxport --help`` ≤ 0.3 s): nothing here imports torch, onnx or onnxruntime;
# each command imports the stages it runs inside its action.

app = typer.Typer(
    name="fxport",
    help="Get PyTorch models into ONNX correctly: rewrite what the exporter refuses, verify the result.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Tables keep their columns when piped (rich would otherwise assume 80 columns).
_PIPE_WIDTH = 140
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else _PIPE_WIDTH)
stderr = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else _PIPE_WIDTH)


def _choice(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    """A click choice (a str Enum, member = value) built from the core's one list in fxport.engine.choices."""
    return enum.Enum(name, [(value, value) for value in values], type=str, module=__name__)


Device = _choice("Device", choices.DEVICES)
IfStrategy = _choice("IfStrategy", choices.IF_STRATEGIES)
Optimize = _choice("Optimize", choices.OPTIMIZE_LEVELS)
Precision = _choice("Precision", choices.PRECISIONS)
QuantFormat = _choice("QuantFormat", choices.QUANT_FORMATS)
QuantActivations = _choice("QuantActivations", choices.QUANT_ACTIVATIONS)


def flag(help: str, *names: str) -> bool:
    """A boolean option shown without a type (``--no-verify``, not ``--no-verify <bool>``)."""
    return typer.Option(False, *names, help=help, metavar="", show_default=False)


class StatusLine:
    """The live line under the finished stages: spinner, running stage, elapsed time, detail."""

    def __init__(self):
        self.spinner = Spinner("dots", style="cyan")
        self.stage, self.detail = "starting (importing torch)", ""
        self.started = time.perf_counter()

    def set(self, stage: str, detail: str = "") -> None:
        if stage != self.stage:
            self.started = time.perf_counter()
        self.stage, self.detail = stage, detail

    def __rich__(self):
        elapsed = time.perf_counter() - self.started
        self.spinner.update(text=Text(f"{self.stage} {elapsed:.1f}s" + (f"  {self.detail}" if self.detail else ""),
                                      style="bold"))
        return Group(self.spinner)


class OutputMode:
    """How much the CLI prints: normal, quiet (errors only) or json (one JSON document).

    In normal mode on a terminal a live status line names the running stage with its elapsed
    time (and, while verifying, the input set being run), and each finished stage leaves a
    ✓ line. Piped, quiet or JSON runs print only their final lines.
    """

    def __init__(self, quiet: bool, as_json: bool, debug: bool):
        self.quiet = quiet or as_json
        self.as_json = as_json
        self.debug = debug
        self.live_enabled = not self.quiet and sys.stdout.isatty() and sys.stderr.isatty()
        self.status = StatusLine()
        self.started = time.perf_counter()
        self.current_stage = "loading"  # the last stage that started (a Ctrl-C names it)

    @contextlib.contextmanager
    def running(self):
        """Show the live status line for the block (when enabled); with --json, the model's
        own prints go to stderr so that stdout holds only the JSON document."""
        with contextlib.ExitStack() as stack:
            if self.as_json:
                stack.enter_context(contextlib.redirect_stdout(sys.stderr))
            if self.live_enabled:  # its own console on the terminal: torch's quiet blocks redirect sys.stderr
                live_console = Console(file=sys.stderr, stderr=True, soft_wrap=True)
                stack.enter_context(Live(self.status, console=live_console, transient=True, refresh_per_second=8))
            yield

    def progress(self, stage: str, state: str) -> None:
        """The pipeline's progress callback: ``state`` is start, done, or what the stage is doing."""
        if state == "start":
            self.started = time.perf_counter()
            self.current_stage = stage
            self.status.set(stage)
        elif state == "done":
            if self.live_enabled:
                stderr.print(f"[green]✓[/green] {stage} ({time.perf_counter() - self.started:.2f}s)",
                             highlight=False)
            self.status.set("…")
        else:
            self.status.set(stage, state)


def run_guarded(mode: OutputMode, action, on_error=None):
    """Run ``action``; map ConversionError to its one-line message and exit code.

    ``on_error(exc)`` runs first for a ConversionError (``--report`` of a failed run).
    """
    try:
        with mode.running():
            return action()
    except ConversionError as exc:
        if mode.debug:
            traceback.print_exc()
        if on_error is not None:
            on_error(exc)
        if mode.as_json:
            stdout.print_json(json.dumps({"ok": False, **exc.to_dict()}))
        else:
            print_error(exc.message)
            rows = getattr(exc, "report", None)
            if rows:
                stderr.print(verification_table(rows))
            skeleton = getattr(exc, "skeleton", "")
            if skeleton:
                stderr.print("\n# Rule skeletons: save as rules.py, fill in, pass with --rules "
                             "rules.py\n", highlight=False)
                stderr.print(escape(skeleton), highlight=False)
        raise typer.Exit(exc.exit_code)
    except KeyboardInterrupt:  # say where it stopped; the outputs are written atomically, so none is partial
        _interrupted(mode)
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a bug in fxport or a library: still one line unless --debug
        if any(isinstance(cause, KeyboardInterrupt) for cause in exception_chain(exc)):
            _interrupted(mode)  # Ctrl-C inside an extension's import: ImportError("initialization failed")
        if mode.debug:
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if mode.as_json:
            stdout.print_json(json.dumps({"ok": False, "error": type(exc).__name__, "message": message}))
        else:
            print_error(f"{message}; rerun with --debug and report it")
        raise typer.Exit(1)


@contextlib.contextmanager
def interrupts_deferred():
    """A Ctrl-C during the block takes effect when it ends: one inside the import of torch's
    compiler stack can leave an extension half-initialised and crash the interpreter at exit
    (SIGSEGV/SIGABRT) instead of reporting the interruption.

    With Python's own Ctrl-C handler (a process started in the background by a shell ignores
    SIGINT, and then so does the block):

    >>> import os, signal
    >>> ignored_before = signal.signal(signal.SIGINT, signal.default_int_handler)
    >>> try:
    ...     with interrupts_deferred():
    ...         os.kill(os.getpid(), signal.SIGINT)
    ...         print("the block finished")
    ... except KeyboardInterrupt:
    ...     print("then the interruption")
    the block finished
    then the interruption
    >>> _ = signal.signal(signal.SIGINT, ignored_before)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received and previous is not signal.SIG_IGN:
        if callable(previous):
            previous(signal.SIGINT, None)
        raise KeyboardInterrupt


def _interrupted(mode: OutputMode) -> None:
    stderr.print(f"[bold red]interrupted[/bold red] during {mode.current_stage} "
                 f"({time.perf_counter() - mode.started:.1f}s into it)", highlight=False)
    raise typer.Exit(130)


def optimize_choice(optimize: "Optimize | None", no_optimize: bool) -> str:
    """``--optimize`` with ``--no-optimize`` as its alias for ``none`` (conflicting: a usage error)."""
    if no_optimize and optimize not in (None, Optimize.none):
        raise UsageError(f"--no-optimize conflicts with --optimize {optimize.value}",
                         hint="keep one of them (--no-optimize is --optimize none)")
    if no_optimize:
        return "none"
    return optimize.value if optimize is not None else choices.DEFAULT_OPTIMIZE


def either(on: bool, off: bool, on_flag: str, off_flag: str) -> Optional[bool]:
    """A pair of flags as one setting: True, False, or None when neither is given."""
    if on and off:
        raise UsageError(f"{on_flag} conflicts with {off_flag}", hint="keep one of them")
    return True if on else False if off else None


def _print_version(value: bool) -> None:
    if value:
        print(f"fxport {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, metavar="",
                                 help="print fxport's version and exit"),
) -> None:
    """fxport: PyTorch → ONNX, with data-dependent control flow and missing ops rewritten."""


def generation_options(command):
    """Declare the generation settings table's flags (``fxport.generation.settings.FLAGS``) as
    options of ``command``, after its ``task`` parameter; ``command`` takes them as ``**generation``.

    >>> sorted(inspect.signature(generation_options(lambda task, **generation: None)).parameters)[:3]
    ['do_sample', 'early_stopping', 'eos_token_id']
    """
    from fxport.generation.settings import FLAGS

    def parameter(name: str, annotation, default) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)

    options = []
    for row in FLAGS:
        if row.kind == "switch":
            options += [parameter(row.name, bool, flag(row.help, row.flag)),
                        parameter(f"no_{row.name}", bool, flag(row.off_help, f"--no-{row.flag[2:]}"))]
        elif row.kind == "ids":
            options.append(parameter(row.name, List[int], typer.Option([], row.flag, metavar=row.metavar, help=row.help)))
        else:
            annotation = {"int": Optional[int], "id": Optional[int], "float": Optional[float]}.get(row.kind, Optional[str])
            options.append(parameter(row.name, annotation, typer.Option(None, row.flag, metavar=row.metavar, help=row.help)))
    signature = inspect.signature(command)
    given = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    at = next(i for i, p in enumerate(given) if p.name == "task") + 1
    command.__signature__ = signature.replace(parameters=given[:at] + options + given[at:])
    return command


@app.command()
@generation_options
def convert(
    target: str = typer.Argument(..., metavar="TARGET", help="path/to/file.py:Name or package.module:Name"),
    inputs: List[str] = typer.Option([], "--input", "-i", metavar="NAME=SHAPE", help="NAME=SHAPE[:DTYPE], e.g. x=1x3x224x224 or n=scalar:int64"),
    dynamic: List[str] = typer.Option([], "--dynamic", metavar="NAME:AXIS=DIM", help="axis AXIS of input NAME is the dynamic dimension DIM; several axes: x:0=batch,2=h"),
    inputs_fn: Optional[str] = typer.Option(None, "--inputs-fn", metavar="FILE.py:FUNC", help="FILE.py:FUNC returning inputs (tuple, dict, or list of input sets)"),
    task: Optional[str] = typer.Option(None, "--task", metavar="TASK", help="TARGET is a local transformers checkpoint directory; build the model for TASK: text-generation or text-generation-step (docs/generation.md)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="PATH", help="where to write the ONNX model"),
    opset: Optional[int] = typer.Option(None, "--opset", metavar="N", help="ONNX opset version"),
    device: Device = typer.Option(Device.auto, "--device", metavar="DEVICE", help="where to verify: auto, cpu or cuda"),
    no_verify: bool = flag("skip verification against eager PyTorch", "--no-verify"),
    optimize: Optional[Optimize] = typer.Option(None, "--optimize", metavar="LEVEL", help="none, generic (default: constant folding, CSE) or ort (ONNX Runtime fusions: ORT-only ops; docs/optimize.md)"),
    no_optimize: bool = flag("skip ONNX graph optimisation (same as --optimize none)", "--no-optimize"),
    if_strategy: IfStrategy = typer.Option(IfStrategy.auto, "--if-strategy", metavar="HOW", help="tensor-conditioned if → where, cond, or auto (per statement)"),
    no_control_flow: bool = flag("do not convert data-dependent control flow (shows the stock capture failure)", "--no-control-flow"),
    no_convert_libraries: bool = flag("do not convert installed packages' functions where capture stops on data-dependent control flow (refuse instead)", "--no-convert-libraries"),
    precision: Precision = typer.Option(Precision.fp32, "--precision", metavar="TYPE", help="fp32, fp16 (half model), int8 (weights and activations, onnxruntime's quantiser; not inside Loop/If bodies), or weight-only int4 / int8-weights (Linear weights in blocks, every graph, verified against eager with the same weights: for --task text-generation); see docs/precision.md"),
    block_size: Optional[int] = typer.Option(None, "--block-size", metavar="N", help="int4 / int8-weights: input features per scale: 16, 32 (default), 64, 128 or 256"),
    quant_format: Optional[QuantFormat] = typer.Option(None, "--quant-format", metavar="FORM", help="int4 / int8-weights: matmulnbits (com.microsoft.MatMulNBits, default) or qdq (DequantizeLinear with block_size → MatMul, opset 21)"),
    quant_activations: Optional[QuantActivations] = typer.Option(None, "--quant-activations", metavar="TYPE", help="int4 / int8-weights: float32 (MatMulNBits accuracy level 0, default for matmulnbits) or int8 (quantised per block at run time: accuracy level 4, ONNX Runtime's fast CPU path; verified against eager quantising them the same way; always for qdq)"),
    calibrate: Optional[str] = typer.Option(None, "--calibrate", metavar="FILE.py:FUNC", help="int8: FILE.py:FUNC returning calibration input sets (static quantisation)"),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", metavar="X", help="int8: fail below this cosine similarity to eager fp32 (default 0.99)"),
    external_data: bool = flag("weights in OUTPUT.data beside the model (default: when over 1.5 GiB; protobuf holds 2 GiB)", "--external-data"),
    no_external_data: bool = flag("weights inside the model file (a usage error over 2 GiB)", "--no-external-data"),
    atol: Optional[float] = typer.Option(None, "--atol", metavar="X", help="absolute tolerance for float outputs (default: per dtype, 1e-4 for float32)"),
    rtol: Optional[float] = typer.Option(None, "--rtol", metavar="X", help="relative tolerance for float outputs (default: per dtype, 1e-3 for float32)"),
    strict_coverage: bool = flag("fail when some side of a converted if or trip count of a converted loop was reached by no input set (default: a warning)", "--strict-coverage"),
    report: Optional[Path] = typer.Option(None, "--report", metavar="PATH", help="write the conversion report as JSON"),
    rules: List[Path] = typer.Option([], "--rules", metavar="FILE.py", help="a Python file of fxport rules (repeatable)"),
    disable: List[str] = typer.Option([], "--disable", metavar="NAME", help="leave out the rule NAME (repeatable; see `fxport rules`)"),
    quiet: bool = flag("print errors only", "--quiet", "-q"),
    as_json: bool = flag("print one JSON document (for machines)", "--json"),
    debug: bool = flag("show tracebacks", "--debug"),
    **generation,
) -> None:
    """Convert a model to ONNX and verify it against eager PyTorch."""
    mode = OutputMode(quiet, as_json, debug)
    built: list[str] = []  # what --task built, said with the result

    def action():
        loaded = _loaded(mode, target, task, generation, inputs, dynamic, inputs_fn, opset, (output, report),
                         verify=not no_verify)
        built.append(loaded.description)
        from fxport.engine.options import Options
        from fxport.engine.pipeline import convert as convert_model

        options = Options(
            opset=opset, verify=not no_verify, device=device.value,
            optimize=optimize_choice(optimize, no_optimize), if_strategy=if_strategy.value, control_flow=not no_control_flow,
            convert_libraries=not no_convert_libraries,
            rules=[str(path) for path in rules] or None, disable_rules=tuple(disable), precision=precision.value,
            calibration=calibrate, min_cosine=min_cosine, block_size=block_size,
            quant_format=quant_format.value if quant_format is not None else None,
            quant_activations=quant_activations.value if quant_activations is not None else None,
            external_data=either(external_data, no_external_data, "--external-data", "--no-external-data"),
            atol=atol, rtol=rtol, strict_coverage=strict_coverage,
        )
        example, *extra = loaded.input_sets
        result = convert_model(loaded.module, example.args, kwargs=example.kwargs, dynamic_shapes=loaded.dynamic_shapes,
                               output=output, verify_inputs=extra or None, options=options, progress=mode.progress)
        if report is not None:
            write_report(result.to_json(), report)
        return result

    def report_failure(exc: ConversionError) -> None:
        if report is not None and not isinstance(exc, (UsageError, OutputWriteError)):
            with contextlib.suppress(OutputWriteError):  # the error printed is the run's own
                write_report(json.dumps({"ok": False, **exc.to_dict()}, indent=2), report)

    result = run_guarded(mode, action, on_error=report_failure)
    task_line = {"task": {"name": task, "built": built[0]}} if task and built else {}
    if mode.as_json:
        stdout.print_json(json.dumps({"ok": True, **task_line, **result.to_dict()}))
    elif not mode.quiet:
        if task_line:
            stdout.print(f"Task {task}: {escape(built[0])}", highlight=False)
        print_summary(result)


def _loaded(mode: OutputMode, target: str, task: Optional[str], flags: dict, inputs: List[str], dynamic: List[str],
            inputs_fn: Optional[str], opset: Optional[int], outputs: tuple, verify: bool = True):
    """The model to convert (:func:`_load`), after the imports (said on the status line) and the
    checks that cost nothing: the opset, the output paths, the generation flags."""
    mode.progress("load", "start")
    mode.progress("load", "importing torch and the exporter")
    with interrupts_deferred():  # a Ctrl-C inside these imports takes effect after them
        for module in ("fxport.load.targets", "fxport.common.files", "fxport.engine.options", "fxport.engine.pipeline"):
            importlib.import_module(module)
    from fxport.common.files import check_writable
    from fxport.generation.settings import settings_from_flags
    from fxport.engine.options import check_opset

    mode.progress("load", f"loading {target}")
    check_opset(opset)  # before loading: a usage error costs nothing
    for path in outputs:  # before converting, not after minutes of it
        if path is not None:
            check_writable(path)
    loaded = _load(target, task, settings_from_flags(flags), inputs, dynamic, inputs_fn, verify)
    mode.progress("load", "done")
    return loaded


def _load(target: str, task: Optional[str], generation: dict, inputs: List[str], dynamic: List[str],
          inputs_fn: Optional[str], verify: bool = True):
    """The model to convert: TARGET as a module, or built by --task from a checkpoint directory
    (``verify``: also the sets and the check against ``generate()`` only verification reads)."""
    from fxport.errors import UsageError

    given = [f"--{name.replace('_', '-')}" for name, value in generation.items() if value is not None]
    if task is None:
        from fxport.load.targets import load_model

        if given:
            raise UsageError(f"{given[0]} is a generation setting", hint="add --task text-generation")
        return load_model(target, input_specs=inputs, dynamic_specs=dynamic, inputs_fn=inputs_fn)
    if inputs or dynamic:
        raise UsageError("--task builds its own inputs; -i and --dynamic do not apply",
                         hint="drop -i/--dynamic, or pass --inputs-fn FILE.py:FUNC for your own prompts")
    from fxport.load.targets import load_inputs_fn
    from fxport.load.tasks import load_task

    loaded = load_task(target, task, generation, verify=verify)
    if inputs_fn:
        loaded.input_sets = load_inputs_fn(inputs_fn)
    return loaded


@app.command("rules")
def list_rules(
    rules: List[Path] = typer.Option([], "--rules", metavar="FILE.py", help="also list the rules in this file (repeatable)"),
    as_json: bool = flag("print JSON", "--json"),
    debug: bool = flag("show tracebacks", "--debug"),
) -> None:
    """List the rules fxport applies, by the names --disable takes: control-flow conversions, graph passes, built-ins (op rules and decision:<op> rules verification replays), installed packages' and --rules files'."""
    mode = OutputMode(False, as_json, debug)

    def action():
        from fxport.rules import resolve

        ruleset = resolve([str(path) for path in rules] or None)
        return ruleset

    ruleset = run_guarded(mode, action)
    rows = [rule.describe() for rule in ruleset.rules]
    if mode.as_json:
        stdout.print_json(json.dumps({"rules": rows}))
        return
    table = Table(title=f"{len(rows)} rules", title_justify="left")
    for column in ("name", "tier", "target", "scope", "doc"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(str(row[key])) for key in ("name", "tier", "target", "scope", "doc")))
    stdout.print(table)


@app.command("ops")
def list_missing_ops(
    target: str = typer.Argument(..., metavar="TARGET", help="path/to/file.py:Name or package.module:Name"),
    inputs: List[str] = typer.Option([], "--input", "-i", metavar="NAME=SHAPE", help="NAME=SHAPE[:DTYPE]"),
    dynamic: List[str] = typer.Option([], "--dynamic", metavar="NAME:AXIS=DIM", help="NAME:AXIS=DIMNAME[,AXIS=DIMNAME]"),
    inputs_fn: Optional[str] = typer.Option(None, "--inputs-fn", metavar="FILE.py:FUNC", help="FILE.py:FUNC returning inputs"),
    opset: Optional[int] = typer.Option(None, "--opset", metavar="N", help="ONNX opset version"),
    rules: List[Path] = typer.Option([], "--rules", metavar="FILE.py", help="a Python file of fxport rules (repeatable)"),
    disable: List[str] = typer.Option([], "--disable", metavar="NAME", help="leave out the rule NAME (repeatable)"),
    debug: bool = flag("show tracebacks", "--debug"),
) -> None:
    """List every op of a model without an ONNX translation, with a rule skeleton for each.

    Exits 1 when some op lacks a translation, 0 when every op has one.
    """
    mode = OutputMode(False, False, debug)

    def action():
        from fxport.engine.pipeline import scan_model

        return scan_model(target, inputs=inputs, dynamic=dynamic, inputs_fn=inputs_fn,
                          opset=opset, rules=[str(path) for path in rules] or None,
                          disable=tuple(disable))

    missing = run_guarded(mode, action)
    if not missing:
        stdout.print("Every op has an ONNX translation.")
        return
    from fxport.lower.missing_ops import rule_skeleton

    table = Table(title=f"{len(missing)} op(s) without an ONNX translation", title_justify="left")
    for column in ("op", "where", "schema"):
        table.add_column(column)
    for entry in missing:
        table.add_row(escape(entry.op), escape(str(entry.location or "")), escape(entry.schema))
    stdout.print(table)
    stdout.print("\n# Rule skeletons: save as rules.py, fill in, pass with --rules rules.py\n")
    stdout.print(escape(rule_skeleton(missing)), highlight=False)
    raise typer.Exit(1)


@app.command()
def diff(
    target: str = typer.Argument(..., help="a model target (file.py:Name), or A.onnx followed by B.onnx"),
    other: Optional[str] = typer.Argument(None, help="B.onnx when TARGET is A.onnx"),
    inputs: List[str] = typer.Option([], "--input", "-i", metavar="NAME=SHAPE", help="NAME=SHAPE[:DTYPE], as for convert"),
    dynamic: List[str] = typer.Option([], "--dynamic", metavar="NAME:AXIS=DIM", help="NAME:AXIS=DIMNAME[,AXIS=DIMNAME], as for convert"),
    inputs_fn: Optional[str] = typer.Option(None, "--inputs-fn", metavar="FILE.py:FUNC", help="FILE.py:FUNC returning inputs, as for convert"),
    opset: Optional[int] = typer.Option(None, "--opset", metavar="N", help="ONNX opset version"),
    no_verify: bool = flag("skip verification against eager PyTorch", "--no-verify"),
    if_strategy: IfStrategy = typer.Option(IfStrategy.auto, "--if-strategy", help="tensor-conditioned if → where, cond, or auto"),
    rules: List[Path] = typer.Option([], "--rules", metavar="FILE.py", help="a Python file of fxport rules (repeatable)"),
    disable: List[str] = typer.Option([], "--disable", metavar="NAME", help="leave out the rule NAME (repeatable)"),
    html: Optional[Path] = typer.Option(None, "--html", metavar="PATH", help="write a self-contained HTML report"),
    details: bool = flag("list every node, not only the changed ones", "--details"),
    as_json: bool = flag("print the diff as one JSON document", "--json"),
    debug: bool = flag("show tracebacks", "--debug"),
) -> None:
    """Show what rewriting changed: source, captured graph and ONNX, per rule; or diff two ONNX files."""
    mode = OutputMode(False, as_json, debug)

    def action():
        from fxport.diff.command import run_diff

        return run_diff(target, other, inputs=inputs, dynamic=dynamic, inputs_fn=inputs_fn, opset=opset,
                        verify=not no_verify, html=html, progress=mode.progress, if_strategy=if_strategy.value,
                        rules=[str(path) for path in rules] or None, disable_rules=tuple(disable))

    result = run_guarded(mode, action)
    if as_json:
        stdout.print_json(json.dumps({"ok": True, **result.to_dict()}))
    else:
        import contextlib

        from fxport.diff.render_terminal import render_terminal

        paged = stdout.pager(styles=True) if details and stdout.is_terminal else contextlib.nullcontext()
        with paged:  # --details on a terminal pages like git diff; pipes get plain text
            render_terminal(result, stdout, details=details)
        if html is not None:
            stdout.print(f"wrote {escape(str(html))}", highlight=False)


def write_report(text: str, path: Path) -> None:
    """Write the ``--report`` JSON atomically (also for a failed run: what ran, and the error)."""
    from fxport.common.files import write_text_atomically

    write_text_atomically(text, path)


def print_summary(result) -> None:
    """The result table the CLI prints after a conversion."""
    for warning in result.warnings:
        stderr.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    for rewrite in result.rewrites:
        if rewrite.rule == "library-function":  # converted library code: one line each, besides the table
            stdout.print(escape(rewrite.detail), highlight=False)
    if result.rewrites:
        table = Table(title="Applied rewrites", title_justify="left")
        for column in ("rule", "tier", "where", "what"):
            table.add_column(column)
        for rewrite in result.rewrites:
            table.add_row(escape(rewrite.rule), rewrite.tier, escape(str(rewrite.location or "")), escape(rewrite.detail))
        stdout.print(table)
    else:
        stdout.print("No rewrites were needed.")
    if result.verification:
        stdout.print(verification_table(result.verification))
    ops = ", ".join(f"{op}×{n}" for op, n in result.op_counts().items())
    stdout.print(f"ONNX ops (opset {result.opset}): {escape(ops)}", highlight=False)
    if result.node_counts:
        stages = " → ".join(f"{count} {stage}" for stage, count in result.node_counts.items())
        stdout.print(f"Nodes ({result.precision}): {stages}", highlight=False)
    if getattr(result, "quantization", None):
        from fxport.verify.weight_agreement import describe as describe_agreement
        from fxport.lower.weight_quantization import describe_summary

        stdout.print(f"{describe_summary(result.quantization)}; "
                     f"{describe_agreement(result.quantization.get('agreement_with_fp32'))}", highlight=False)
    if getattr(result, "optimize", None) == "ort":
        fired = ", ".join(f"{name}×{count}" for name, count in result.fusions.items()) or "none fired"
        stdout.print(f"ONNX Runtime fusions: {escape(fired)}", highlight=False)
    if result.tolerances:
        given = ", ".join(f"{key} {value:g}" for key, value in result.tolerances.items() if value is not None)
        stdout.print(f"Tolerances: {given} (yours; the rest per dtype)", highlight=False)
    timings = "  ".join(f"{stage} {seconds:.2f}s" for stage, seconds in result.timings.items())
    stdout.print(f"Time: {timings}", highlight=False)
    verdict = "[green]verified[/green]" if result.verified else "[yellow]not verified[/yellow]"
    where = f"wrote {result.output_path}" if result.output_path else "kept in memory (no -o given)"
    stdout.print(f"{verdict}; {escape(where)}", highlight=False)


def verification_table(rows) -> Table:
    table = Table(title="Verification: ONNX Runtime vs eager PyTorch", title_justify="left")
    for column in ("input set", "shapes", "provider", "max abs err", "max rel err", "cosine", "result"):
        table.add_column(column)
    for row in rows:
        shapes = " ".join(shape_text(s) for s in row.input_shapes)
        if row.note:
            verdict = f"[dim]{escape(row.note)}[/dim]"
        else:
            verdict = "[green]pass[/green]" if row.passed else f"[red]FAIL[/red] {', '.join(row.mismatched_outputs)}"
        if row.onnx_error is not None:
            verdict += escape(f" (vs float64: onnx {row.onnx_error:.2g}, eager {row.eager_error:.2g})")
        table.add_row(escape(row.name), shapes, row.provider.replace("ExecutionProvider", ""),
                      _measured(row.max_abs_error, ".2e"), _measured(row.max_rel_error, ".2e"),
                      _measured(row.cosine_similarity, ".6f"), verdict)
    return table


def _measured(value: float, spec: str) -> str:
    """A table cell: the value, or a dash where nothing was measured (a skipped row)."""
    return "[dim]-[/dim]" if value != value else format(value, spec)


def main() -> None:
    """Console-script entry point; usage errors exit with 2, conversion failures with 1."""
    command = typer.main.get_command(app)
    for each in (command, *getattr(command, "commands", {}).values()):
        _show_help_flag_without_type(each)
    try:
        code = command(prog_name="fxport", standalone_mode=False)
    except typer.exceptions.TyperException as exc:  # click's usage errors, worded like fxport's own
        if type(exc).__name__ != "NoArgsIsHelpError":  # `fxport` alone: building the error printed the help
            _click_error(exc, as_json="--json" in sys.argv)
        sys.exit(exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        print_error("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _click_error(exc, as_json: bool) -> None:
    """A usage error click found (``No such option: --bogus``), worded like fxport's own."""
    text = " ".join(exc.format_message().split()).replace(": Value error, ", ": ").rstrip(".")
    ctx = getattr(exc, "ctx", None)
    text += f"; see {ctx.command_path if ctx is not None else 'fxport'} --help"
    if as_json:
        stdout.print_json(json.dumps({"ok": False, "error": "UsageError", "message": text}))
    else:
        print_error(text)


def print_error(text: str) -> None:
    """Every error the CLI prints, click's and fxport's: ``error: what; what to do``, one line."""
    stderr.print(f"[bold red]error:[/bold red] {escape(text)}", highlight=False)


def _show_help_flag_without_type(command) -> None:
    """``--help`` is a flag like the others: no ``<bool>`` beside it in the help text."""
    original = command.get_help_option

    def get_help_option(ctx):
        option = original(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


if __name__ == "__main__":
    main()
