"""``rungar apply`` and a provider whose connection settings changed: it is reconnected.

A provider entry whose ``address``, ``command``, ``tls`` or ``token_file`` changed (or, for a
provider served by a plugin, any of the keys handed to the plugin when it starts) is reached
through a new client (its new plugin started) before anything changes; new calls go to it at
once, and the old client is closed (its plugin stopped) once the calls in flight on it have
ended. The provider's runners are kept: their machines are still there, and the next ``List``
on the new connection finds them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import structlog

from rungar.config.model import ProviderConfig
from rungar.config.problems import START, Mark, Problem, Problems
from rungar.config.yaml_safe import YMap, YNode, YScalar, YSeq, read_yaml
from rungar.daemon.shipped_plugins import is_shipped
from rungar.model.machine import ProviderInfo
from rungar.model.provider import Provider

log = structlog.get_logger("rungar.reconnect")

# Keys of a provider's own settings that say how it is reached, whoever serves it.
CONNECTION_OPTIONS = ("tls", "token_file")
# A PEM file (certificate or key) starts its first block with this.
PEM_MARK = b"-----BEGIN "


@runtime_checkable
class _Retirable(Protocol):
    async def close_when_idle(self) -> None: ...


@runtime_checkable
class _Closable(Protocol):
    async def close(self) -> None: ...


def served_by_plugin(config: ProviderConfig) -> bool:
    """Whether the daemon starts a plugin for ``config``: its ``command:``, or the shipped
    plugin of a gcp or aws provider with neither address nor command."""
    return bool(config.command) or (not config.address and is_shipped(config.type))


def connected(config: ProviderConfig) -> bool:
    """Whether ``config`` is reached over a connection at all (not served in process)."""
    return bool(config.address) or served_by_plugin(config)


def connection_changes(old: ProviderConfig, new: ProviderConfig) -> list[str]:
    """The keys of a provider entry whose change needs a new connection, in the file's terms;
    empty when the old connection serves the new entry as it is."""
    if not connected(old) and not connected(new):
        return []  # served in process: no connection to renew
    changed = [key for key in ("address", "command") if getattr(old, key) != getattr(new, key)]
    changed += [key for key in CONNECTION_OPTIONS if old.options.get(key) != new.options.get(key)]
    if served_by_plugin(old) or served_by_plugin(new):
        # A plugin reads its type's keys once, when it starts: only a new one sees a change.
        if old.type != new.type:
            changed.append("type")
        keys = (set(old.options) | set(new.options)) - set(CONNECTION_OPTIONS)
        changed += sorted(k for k in keys if old.options.get(k) != new.options.get(k))
    return changed


def reconnect_line(name: str, changed: list[str]) -> str:
    """How ``rungar apply`` says it, in its summary."""
    return f"~ provider {name}: reconnecting ({', '.join(changed)} changed)"


def connection_file_problems(config: ProviderConfig, text: str, filename: str) -> list[str]:
    """The token and TLS files ``config`` names that cannot be used, each as
    ``file:line:col: providers.NAME.KEY: what`` naming the file it could not use: checked before
    anything changes, so bad new settings leave the old connection. ``text`` is the
    scale_sets.yaml ``config`` came from, read again for the keys' positions."""
    found: list[tuple[tuple[str, ...], str]] = []
    token_file = config.options.get("token_file")
    if isinstance(token_file, str) and token_file:
        found += _unusable(("token_file",), token_file, pem=False)
    tls = config.options.get("tls")
    if isinstance(tls, Mapping):
        for key in ("ca_file", "cert_file", "key_file"):
            path = tls.get(key)
            if isinstance(path, str) and path:
                found += _unusable(("tls", key), path, pem=True)
    if not found:
        return []
    entry = _provider_entry(text, config.name)
    return [
        str(
            Problem(
                filename, _key_mark(entry, keys), f"providers.{config.name}.{'.'.join(keys)}", what
            )
        )
        for keys, what in found
    ]


def _unusable(keys: tuple[str, ...], path: str, *, pem: bool) -> list[tuple[tuple[str, ...], str]]:
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        return [(keys, f"cannot read {path}: {e.strerror or e}")]
    if pem and PEM_MARK not in content:
        return [(keys, f"{path} is not a PEM file")]
    if not pem and not content.strip():
        return [(keys, f"{path} is empty")]
    return []


def undeclared_runner_keys(
    runner: Mapping[str, Any], info: ProviderInfo, provider: str, refused: Sequence[str]
) -> list[str]:
    """The keys of a runner block that a plugin's Info does not declare among its capabilities,
    each as ``key: what`` with the closest declared key; none when it declares no keys (only
    ``feature:`` words, or nothing), and none for a key its ValidateRunner ``refused`` already."""
    declared = sorted({c for c in info.capabilities if not c.startswith("feature:")})
    if not declared:
        return []
    named = {p.partition(": ")[0] for p in refused}
    problems = []
    for key in runner:
        if key in declared or key in named:
            continue
        near = difflib.get_close_matches(key, declared, 1, 0.6)
        hint = f"; did you mean {near[0]}?" if near else f"; it declares {', '.join(declared)}"
        problems.append(
            f"{key}: not a runner key provider {provider} ({info.kind}) declares in its Info{hint}"
        )
    return problems


def runner_problem(text: str, filename: str, scale_set: str, provider: str, problem: str) -> str:
    """A provider's ValidateRunner refusal of a scale set's runner block, as every other
    configuration problem is told: ``file:line:col: path: what``, at the key it names (``memroy:
    ...``) where the scale set's block or the provider's writes it, else at the scale set's
    entry for the provider."""
    key, sep, what = problem.partition(": ")
    if not sep or " " in key:
        key, what = "", problem
    tree = read_yaml(text, Problems(""))
    entry = _named_in(tree, "scale_sets", scale_set)
    ref: YNode | None = None
    if isinstance(entry, YMap) and "providers" in entry.entries:
        refs = entry.entries["providers"].value
        if isinstance(refs, YSeq):
            for item in refs.items:
                named = item.entries.get("name") if isinstance(item, YMap) else None
                if (isinstance(item, YScalar) and item.value == provider) or (
                    named is not None
                    and isinstance(named.value, YScalar)
                    and named.value.value == provider
                ):
                    ref = item
    base = f"scale_sets[{scale_set}].providers[{provider}].runner"
    if key:
        if isinstance(ref, YMap) and _has_runner_key(ref, key):
            return str(Problem(filename, _key_mark(ref, ("runner", key)), f"{base}.{key}", what))
        own = _provider_entry(text, provider)
        if own is not None and _has_runner_key(own, key):
            path = f"providers[{provider}].runner.{key}"
            return str(Problem(filename, _key_mark(own, ("runner", key)), path, what))
    mark = ref.mark if ref is not None else (entry.mark if isinstance(entry, YMap) else START)
    return str(Problem(filename, mark, f"{base}.{key}" if key else base, what))


def _has_runner_key(entry: YMap, key: str) -> bool:
    runner = entry.entries.get("runner")
    return runner is not None and isinstance(runner.value, YMap) and key in runner.value.entries


def _named_in(tree: YNode | None, section: str, name: str) -> YMap | None:
    items = tree.entries.get(section) if isinstance(tree, YMap) else None
    if items is None or not isinstance(items.value, YSeq):
        return None
    for item in items.value.items:
        if isinstance(item, YMap) and "name" in item.entries:
            named = item.entries["name"].value
            if isinstance(named, YScalar) and named.value == name:
                return item
    return None


def _provider_entry(text: str, name: str) -> YMap | None:
    """The provider entry named ``name`` in ``text`` (already checked, so it parses)."""
    tree = read_yaml(text, Problems(""))
    providers = tree.entries.get("providers") if isinstance(tree, YMap) else None
    if providers is None or not isinstance(providers.value, YSeq):
        return None
    for item in providers.value.items:
        if isinstance(item, YMap) and "name" in item.entries:
            named = item.entries["name"].value
            if isinstance(named, YScalar) and named.value == name:
                return item
    return None


def _key_mark(entry: YMap | None, keys: tuple[str, ...]) -> Mark:
    """Where the last of ``keys`` is written under ``entry``; the entry's own place, or the
    file's start, when it cannot be found (a key given by a merge, say)."""
    mark: Mark = START
    node: YNode | None = entry
    for key in keys:
        if not isinstance(node, YMap):
            break
        mark = node.mark
        if key not in node.entries:
            break
        mark = node.entries[key].key_mark
        node = node.entries[key].value
    return mark


async def retire(name: str, old: Provider) -> None:
    """Close a replaced connection once its calls in flight have ended (stop its plugin)."""
    try:
        if isinstance(old, _Retirable):
            await old.close_when_idle()
        elif isinstance(old, _Closable):
            await old.close()
    except Exception as e:  # a failed close must not end the daemon's tasks
        log.warning("provider.old_connection_not_closed", provider=name, error=str(e))
        return
    log.info("provider.old_connection_closed", provider=name)
