"""``rungar completion bash|zsh|fish``: a completion script for the shell, on stdout.

    source <(rungar completion bash)                                 # bash, or in ~/.bashrc
    source <(rungar completion zsh)                                  # zsh, or in ~/.zshrc
    rungar completion fish > ~/.config/fish/completions/rungar.fish  # fish

The script is generated from the commands' own parsers, so it completes every command,
subcommand and option this version has, and the values of an option that has a fixed set
(``rungar usage --by <TAB>``); file names are completed where a command takes one.
Scale set, provider and runner names are asked of the daemon when completed, as kubectl and gh
do: the script runs ``rungar __complete KIND``, which prints one name a line, or nothing when
the daemon does not answer within a second (docs/cli.md, "Completion").
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from rungar.cli.complete_names import KINDS

SHELLS = ("bash", "zsh", "fish")

# Options whose value is a name of a kind, wherever they appear.
NAME_OPTIONS = {"--scale-set": "scale-sets", "--provider": "providers"}
ASKING = ("events", "runners")  # the commands whose --scale-set and --provider are such names


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


def _positional_kind(path: str) -> str:
    """The kind of name a command's positional argument is, or "": ``scale-sets pause NAME``
    is a scale set's, ``runners rm NAME...`` a runner's."""
    head, _, action = path.partition(" ")
    if head in KINDS and action and action != "ls":
        return head
    return ""


def values(parser: argparse.ArgumentParser, path: str = "") -> dict[str, str]:
    """``"path|--option"`` → the words completed as its value: its choices, or ``@KIND`` for a
    name asked of the daemon; and ``"path|"`` → ``@KIND`` where the positional is a name."""
    out: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        for option in action.option_strings:
            if option in NAME_OPTIONS and path.split(" ")[0] in ASKING:
                out[f"{path}|{option}"] = "@" + NAME_OPTIONS[option]
            elif action.choices and option.startswith("--"):
                out[f"{path}|{option}"] = " ".join(str(c) for c in action.choices)
    kind = _positional_kind(path)
    if kind and any(not a.option_strings for a in parser._actions):
        out[f"{path}|"] = "@" + kind
    for name, sub in _subparsers(parser).items():
        out.update(values(sub, f"{path} {name}".strip()))
    return out


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
    valued = "\n".join(
        f"    [{shlex.quote(key)}]={shlex.quote(found)}" for key, found in values(parser).items()
    )
    return f"""# bash completion for rungar (rungar completion bash)
_rungar_names() {{
  # Names asked of the daemon (on the command line's --socket, if any); nothing if it is silent.
  local sock=() i
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ "${{COMP_WORDS[i]}}" == --socket ]] && sock=(--socket "${{COMP_WORDS[i+1]}}")
  done
  "${{COMP_WORDS[0]}}" __complete "$1" "${{sock[@]}}" 2>/dev/null
}}
_rungar() {{
  local -A words=(
{table}
  )
  local -A values=(
{valued}
  )
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" path="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    [[ "$w" == -* ]] && continue
    if [[ -n "${{words[${{path:+$path }}$w]+set}}" ]]; then
      path="${{path:+$path }}$w"
    fi
  done
  local found="${{values[$path|$prev]-}}"
  if [[ "$prev" == --* && -n "$found" ]]; then
    [[ "$found" == @* ]] && found="$(_rungar_names "${{found#@}}")"
    COMPREPLY=($(compgen -W "$found" -- "$cur"))
    return
  fi
  local candidates="${{words[${{path:-_}}]}}"
  found="${{values[$path|]-}}"
  if [[ -n "$found" && "$cur" != -* ]]; then
    candidates="$(_rungar_names "${{found#@}}")"
  fi
  COMPREPLY=($(compgen -W "$candidates" -- "$cur"))
  if [[ ${{#COMPREPLY[@]}} -eq 0 && "$cur" != -* && -z "$found" ]]; then
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
    for key, found in values(parser).items():
        path, _, option = key.partition("|")
        seen = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in path.split()) or "true"
        words = f"(rungar __complete {found[1:]})" if found.startswith("@") else found
        if option:
            lines.append(
                f"complete -c rungar -n {shlex.quote(seen)} -l {option[2:]} -x "
                f"-a {shlex.quote(words)}"
            )
        else:
            lines.append(f"complete -c rungar -n {shlex.quote(seen)} -f -a {shlex.quote(words)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from rungar.cli.main import build_parser

    parser = build_parser(full=True)
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](parser)
    sys.stdout.write(script)
    return 0
