"""Entry point of the `torchmark` command: sub-commands and one-line error handling."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import click

from torchmark import __version__
from torchmark.cli import store_options
from torchmark.core.bounded_input import brief, parse_size, set_max_bytes
from torchmark.core.errors import BusyError, TorchmarkError, error_line
from torchmark.core.signals import Terminated, interrupted_by, sigterm_as_interrupt

EXIT_USAGE = 2
LINE_LIMIT = 1000  # an error line longer than this is cut (values are cut shorter)


def _max_input_size(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        try:
            set_max_bytes(parse_size(value))
        except ValueError as e:
            raise click.BadParameter(str(e)) from None


# command name -> "module:attribute", imported when the command is run (or listed in
# --help): `torchmark runs` then imports neither torch nor the measuring commands
COMMANDS = {
    "timeit": "timeit_cmd:timeit_cmd", "compare": "compare_cmd:compare_cmd",
    "ab": "ab_cmd:ab_cmd", "demo": "demo_cmd:demo_cmd", "fuzz": "fuzz_cmd:fuzz_cmd",
    "callgrind": "callgrind_cmd:callgrind_cmd",
    "callgrind-diff": "callgrind_cmd:callgrind_diff_cmd", "cache": "cache_cmd:cache_cmd",
    "suite": "suite_cmd:suite_cmd", "ops": "ops_cmd:ops_cmd",
    "replay": "replay_cmd:replay_cmd", "trace": "replay_cmd:trace_cmd",
    "db": "db_cmd:db_cmd", "import": "import_cmd:import_cmd", "runs": "runs_cmd:runs_cmd",
    "history": "history_cmd:history_cmd", "show": "show_cmd:show_cmd",
    "export": "export_cmd:export_cmd", "gate": "gate_cmd:gate_cmd",
    "regressions": "regressions_cmd:regressions_cmd", "report": "report_cmd:report_cmd",
    "calibrate": "calibrate_cmd:calibrate_cmd", "bisect": "bisect_cmd:bisect_cmd",
    "explain": "explain_cmd:explain_cmd", "env": "env_cmd:env_cmd",
    "serve": "serve_cmd:serve_cmd",
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        import importlib

        module, attribute = target.split(":")
        return getattr(importlib.import_module(f"torchmark.cli.{module}"), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torchmark")
@click.option("--max-input-size", metavar="SIZE", callback=_max_input_size,
              expose_value=False, is_eager=True,
              help="Largest config, trace or results file read (e.g. 256M) [default: 64M, "
                   "or $TORCHMARK_MAX_INPUT_SIZE].")
def cli() -> None:
    """torchmark: PyTorch micro-benchmarks you can trust."""


def _fail(message: str, code: int) -> int:
    first_line = str(message).strip().splitlines()[0] if str(message).strip() else "failed"
    click.echo(f"torchmark: error: {brief(first_line, LINE_LIMIT)}", err=True)
    return code


# options many commands take, which a user may put before the command's name
# (`torchmark --db URL runs`)
COMMAND_OPTIONS = ("--db", "--no-store", "--env", "--json", "--resume-run")


def _help_hint(error: click.UsageError, argv: list[str]) -> str:
    """Where to read about the command the error is about: its context's, else (click
    gives some option errors none) the command named on the command line."""
    if error.ctx is not None and " " in error.ctx.command_path:
        return f" (see 'torchmark {error.ctx.command_path.split(' ', 1)[1]} --help')"
    if isinstance(error, click.NoSuchOption) and error.ctx is not None \
            and error.ctx.command is cli and error.option_name in COMMAND_OPTIONS:
        return (f" (a command's options go after its name: 'torchmark COMMAND "
                f"{error.option_name} ...'; see 'torchmark --help')")
    path: list[str] = []
    group: click.Command = cli
    for arg in argv:
        command = group.get_command(click.Context(group), arg) \
            if isinstance(group, click.Group) else None
        if command is None:
            break
        path.append(arg)
        group = command
    return f" (see 'torchmark {' '.join([*path, '--help'])}')"


def _invoke(argv: list[str] | None) -> object:
    """Run the command line as click's main would, but let Ctrl-C through untouched
    (click's main echoes a blank line and raises Abort)."""
    args = sys.argv[1:] if argv is None else list(argv)
    set_max_bytes(None)  # --max-input-size holds for this command line only
    store_options.COMMAND_LINE[:] = ["torchmark", *args]  # as the store records the run
    try:
        with cli.make_context("torchmark", args) as ctx:
            return cli.invoke(ctx)
    except click.exceptions.Exit as e:  # --help, --version
        return e.exit_code
    finally:  # nor after it (main called in a process that goes on: a test, a notebook)
        set_max_bytes(None)


def _closed_pipe() -> int:
    """Stdout's reader is gone: no message, no second error when Python flushes stdout at
    exit; the status a process killed by SIGPIPE would have."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


def _interrupted(code: int, what: str) -> int:
    if sys.stderr.isatty():  # after the terminal's ^C
        sys.stderr.write("\n")
    return _fail(what, code)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; bad input gives one line on stderr and exit status 2."""
    try:
        with sigterm_as_interrupt():
            result = _invoke(argv)
    except click.UsageError as e:
        return _fail(e.format_message() + _help_hint(e, sys.argv[1:] if argv is None else argv),
                     EXIT_USAGE)
    except click.Abort as e:
        terminated = isinstance(e.__cause__ or e.__context__, Terminated)
        return _fail("terminated" if terminated else "interrupted", 143 if terminated else 130)
    except click.ClickException as e:
        return _fail(e.format_message(), e.exit_code)
    except BusyError as e:  # another run holds the results file
        return _fail(str(e), EXIT_USAGE)
    except BrokenPipeError:  # `torchmark ... | head -1`: end quietly, as Unix tools do
        return _closed_pipe()
    except (ValueError, TypeError, SyntaxError, FileNotFoundError, NotImplementedError) as e:
        if getattr(e, "problems", None):  # a config with several problems: one line each
            for line in str(e).splitlines():
                _fail(line, EXIT_USAGE)
            return EXIT_USAGE
        return _fail(f"{type(e).__name__}: {e}" if isinstance(e, SyntaxError) else str(e),
                     EXIT_USAGE)
    except OSError as e:  # a path that is a folder, not writable, ...: one line
        return _fail(str(e), 1)
    except TorchmarkError as e:
        return _fail(str(e), 1)
    except Terminated:
        return _interrupted(143, "terminated")
    except KeyboardInterrupt:
        return _interrupted(130, "interrupted")
    except Exception as e:  # a failure no check foresaw: still one line, unless debugging
        signum = interrupted_by()
        if signum is not None:  # a library turned the Ctrl-C (or SIGTERM) into its error
            return _interrupted(*((143, "terminated") if signum == signal.SIGTERM
                                  else (130, "interrupted")))
        if os.environ.get("TORCHMARK_DEBUG"):
            raise
        return _fail(f"{error_line(e)} (unexpected; TORCHMARK_DEBUG=1 shows the traceback)",
                     1)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
