"""``rungar completion bash|zsh|fish``: a completion script for the shell, on stdout.

    source <(rungar completion bash)                                 # bash, or in ~/.bashrc
    source <(rungar completion zsh)                                  # zsh, or in ~/.zshrc
    rungar completion fish > ~/.config/fish/completions/rungar.fish  # fish

The script is generated from the commands' own parsers, so it completes every command,
subcommand and option this version has; file names are completed where a command takes one.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=__doc__.split("\n\n", 1)[1] if __doc__ else help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def tree(parser: argparse.ArgumentParser, path: str = "") -> dict[str, list[str]]:
    """Each command path ("", "scale-sets", "scale-sets ls") -> the words completed after it."""
    subs = _subparsers(parser)
    out = {path: sorted(subs) + _options(parser)}
    for name, sub in subs.items():
        out.update(tree(sub, f"{path} {name}".strip()))
    return out


def bash_script(parser: argparse.ArgumentParser) -> str:
    words = tree(parser)
    table = "\n".join(
        f"    [{shlex.quote(path or '_')}]={shlex.quote(' '.join(w))}" for path, w in words.items()
    )
    return f"""# bash completion for rungar (rungar completion bash)
_rungar() {{
  local -A words=(
{table}
  )
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    [[ "$w" == -* ]] && continue
    if [[ -n "${{words[${{path:+$path }}$w]+set}}" ]]; then
      path="${{path:+$path }}$w"
    fi
  done
  local candidates="${{words[${{path:-_}}]}}"
  COMPREPLY=($(compgen -W "$candidates" -- "$cur"))
  if [[ ${{#COMPREPLY[@]}} -eq 0 && "$cur" != -* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _rungar rungar
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    return (
        "# zsh completion for rungar (rungar completion zsh): the bash one, through bashcompinit\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser)
    )


def fish_script(parser: argparse.ArgumentParser) -> str:
    lines = ["# fish completion for rungar (rungar completion fish)"]

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        subs, helps = _subparsers(p), _helps(p)
        seen = [f"__fish_seen_subcommand_from {w}" for w in path]
        if path:
            below = [f"not __fish_seen_subcommand_from {' '.join(subs)}"] if subs else []
            choose, options = "; and ".join(seen + below), "; and ".join(seen)
        else:
            choose = options = "__fish_use_subcommand"
        for name in sorted(subs):
            help_text = shlex.quote(helps.get(name, ""))
            lines.append(f"complete -c rungar -n {shlex.quote(choose)} -f -a {name} -d {help_text}")
        for option in _options(p):
            lines.append(f"complete -c rungar -n {shlex.quote(options)} -l {option[2:]}")
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(parser, [])
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from rungar.cli.main import build_parser

    parser = build_parser(full=True)
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](parser)
    sys.stdout.write(script)
    return 0
