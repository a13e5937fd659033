"""The docs' generated references: every setting, from the code that reads it, and the REST API, from its OpenAPI schema.

Settings: the code is scanned for what it reads from the environment (the
typed helpers of ``server/conf.py``, ``os.environ`` and ``os.getenv`` in
``server/``, ``dashboard/`` and ``worker_sdk/``; ``${...}`` in
``docker-compose.yml``). Each variable's default comes from that code when it
is a literal; its meaning, and a default the code computes, from
``docs/settings.yaml``. A variable read but not described, described but read
nowhere, or with two defaults, is a problem: the docs build warns (and fails
under ``-W``), and tests/docs/test_the_settings_reference_lists_every_setting.py
fails.

API: ``manage.py spectacular`` writes the schema the server serves at
``/api/schema/``; every operation and every schema becomes a section.

Both are Sphinx directives (``{shardline-settings}``, ``{shardline-openapi}``)
whose Markdown output MyST parses in place, and plain functions for tests.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_YAML = ROOT / "docs" / "settings.yaml"

# Where each component's code lives, in the order the reference lists them.
COMPONENTS = {
    "server": "Server (web and Celery)",
    "sdk": "SDK (training processes)",
    "cli": "The `shardline` command",
    "compose": "docker-compose (`.env`)",
}
HELPERS = {"env_str", "env_int", "env_bool", "env_list"}


@dataclass
class Read:
    component: str
    path: str
    line: int
    default: str | None  # as the reference shows it; None: no literal default


@dataclass
class Setting:
    name: str
    reads: list[Read] = field(default_factory=list)


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def component_of(path: Path) -> str:
    relative_path = relative(path)
    if relative_path.startswith("worker_sdk/cli/"):
        return "cli"
    if relative_path.startswith("worker_sdk/"):
        return "sdk"
    return "server"


def python_sources() -> list[Path]:
    found = []
    for folder in ("server", "dashboard", "worker_sdk"):
        found += [p for p in sorted((ROOT / folder).rglob("*.py")) if "migrations" not in p.parts]
    return found


def _literal(node: ast.AST):
    """A default as written, when it is a literal (numbers may be multiplied: 256 * 1024 * 1024)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        left, right = _literal(node.left), _literal(node.right)
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            return left * right if isinstance(node.op, ast.Mult) else left + right
        raise ValueError
    return ast.literal_eval(node)


def _shown(value, helper: str) -> str | None:
    if value is None or value == "" or value == []:
        return None
    if helper == "env_bool" or isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def reads_in_python(path: Path) -> list[tuple[str, int, str | None]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        name, default, helper = None, None, ""
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            reads_environ = called == "get" and _is_environ(getattr(func, "value", None))
            if called in HELPERS or reads_environ or called == "getenv":
                name, helper = node.args[0].value, called
                given = node.args[1] if len(node.args) > 1 else None
                given = given or next((k.value for k in node.keywords if k.arg == "default"), None)
                if given is not None:
                    try:
                        default = _shown(_literal(given), helper)
                    except ValueError:
                        default = None
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant):
                name = node.slice.value
        if isinstance(name, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            found.append((name, node.lineno, default))
    return found


COMPOSE_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?)(?P<arg>[^}]*))?\}")


def scan() -> dict[str, Setting]:
    settings: dict[str, Setting] = {}
    for path in python_sources():
        for name, line, default in reads_in_python(path):
            read = Read(component_of(path), relative(path), line, default)
            settings.setdefault(name, Setting(name)).reads.append(read)
    compose = ROOT / "docker-compose.yml"
    for number, text in enumerate(compose.read_text().splitlines(), start=1):
        if text.lstrip().startswith("#"):
            continue
        for match in COMPOSE_VARIABLE.finditer(text):
            default = match.group("arg") if match.group("op") in (":-", "-") else None
            read = Read("compose", "docker-compose.yml", number, default or None)
            settings.setdefault(match.group("name"), Setting(match.group("name"))).reads.append(read)
    return settings


def env_example_names() -> list[str]:
    names = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            names.append(line.split("=", 1)[0].strip())
    return names


def descriptions() -> dict:
    import yaml

    return yaml.safe_load(SETTINGS_YAML.read_text())


def _per_component(value, component: str):
    if isinstance(value, dict):
        return value.get(component)
    return value


def settings_problems() -> list[str]:
    """What keeps the reference from being whole and true; empty when it is."""
    described = descriptions()
    ignored = described.get("not_settings", {})
    patterns = described.get("patterns", {})
    entries = described["settings"]
    found = {name: s for name, s in scan().items() if name not in ignored}
    problems = []
    for name, setting in sorted(found.items()):
        if name not in entries:
            where = ", ".join(sorted({f"{r.path}:{r.line}" for r in setting.reads}))
            problems.append(f"{name} is read ({where}) but not described in docs/settings.yaml")
            continue
        entry = entries[name] or {}
        if not entry.get("meaning"):
            problems.append(f"{name}: docs/settings.yaml gives no meaning")
        for component in sorted({r.component for r in setting.reads}):
            literals = {r.default for r in setting.reads if r.component == component and r.default is not None}
            written = _per_component(entry.get("default"), component)
            if len(literals) > 1:
                problems.append(f"{name} has several defaults in the {component} code: {sorted(literals)}")
            elif literals and written is not None:
                problems.append(
                    f"{name}: the {component} code's default is {literals.pop()!r}; "
                    "docs/settings.yaml must not state another (drop its `default`)"
                )
            elif not literals and written is None:
                problems.append(f"{name}: the {component} code has no literal default; docs/settings.yaml must say it")
    for name in sorted(set(entries) - set(found)):
        problems.append(f"{name} is described in docs/settings.yaml but nothing reads it")
    for name in sorted(ignored):
        if name not in scan():
            problems.append(f"{name} is listed under not_settings in docs/settings.yaml but nothing reads it")
    for pattern, entry in patterns.items():
        prefix = entry["prefix"]
        if not any(f'"{prefix}"' in p.read_text() for p in python_sources()):
            problems.append(f"{pattern}: no code names the prefix {prefix!r}")
    for name in env_example_names():
        if name not in entries:
            problems.append(f".env.example sets {name}, which docs/settings.yaml does not describe")
    return problems


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def settings_markdown() -> str:
    described = descriptions()
    entries, patterns = described["settings"], described.get("patterns", {})
    found = scan()
    out = []
    for component, title in COMPONENTS.items():
        rows = []
        for name in sorted(found):
            reads = [r for r in found[name].reads if r.component == component]
            if not reads or name not in entries:
                continue
            entry = entries[name] or {}
            literal = next((r.default for r in reads if r.default is not None), None)
            default = f"`{literal}`" if literal is not None else _per_component(entry.get("default"), component) or ""
            meaning = _per_component(entry.get("meaning"), component) or ""
            where = ", ".join(sorted({f"`{r.path}`" for r in reads}))
            rows.append(f"| `{name}` | {_cell(default)} | {_cell(meaning)} | {where} |")
        for pattern, entry in patterns.items():
            if component in entry["components"]:
                meaning = _per_component(entry["meaning"], component)
                rows.append(f"| `{pattern}` | {_cell(entry['default'])} | {_cell(meaning)} | |")
        if not rows:
            continue
        out += [f"({_label(component)})=", f"## {title}", "", described["intro"][component].strip(), ""]
        out += ["| Variable | Default | Meaning | Read in |", "| --- | --- | --- | --- |", *sorted(rows), ""]
    return "\n".join(out)


def _label(component: str) -> str:
    return f"settings-{component}"


# The API reference.


def openapi_schema() -> dict:
    """The schema the server serves, from ``manage.py spectacular`` (no database needed)."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("SHARDLINE_PG_CONNECTION_") and key != "DATABASE_URL"
        }
        env.update(
            SECRET_KEY=env.get("SECRET_KEY") or "docs-build-only",
            SHARDLINE_HOME=home,
            DJANGO_SETTINGS_MODULE="server.settings",
            PYTHONPATH=str(ROOT),
        )
        out = Path(home) / "schema.json"
        done = subprocess.run(
            [sys.executable, "manage.py", "spectacular", "--format", "openapi-json", "--file", str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py spectacular failed:\n{done.stdout}{done.stderr}")
        warnings = [
            line for line in (done.stdout + done.stderr).splitlines() if line.startswith(("Warning:", "Error:"))
        ]
        return {"schema": json.loads(out.read_text()), "warnings": warnings}


def _escape(text: str) -> str:
    return str(text).replace("<", "\\<").replace(">", "\\>")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _schema_label(name: str) -> str:
    return f"api-schema-{name.lower()}"


def _type(schema: dict) -> str:
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{_schema_label(name)})"
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            parts = []
            for part in schema[key]:
                shown = _type(part)
                if shown not in parts:
                    parts.append(shown)
            return " or ".join(parts) + (", nullable" if schema.get("nullable") else "")
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'])}"
    shown = kind + (f" ({schema['format']})" if "format" in schema else "")
    return shown + (", nullable" if schema.get("nullable") else "")


def _constraints(schema: dict) -> str:
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(f"`{value}`" for value in schema["enum"] if value is not None))
    for key, word in (
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "length at least"),
        ("maxLength", "length at most"),
        ("minItems", "items at least"),
        ("maxItems", "items at most"),
    ):
        if key in schema and not (key == "maximum" and schema[key] >= 2**63 - 1):
            parts.append(f"{word} {schema[key]}")
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    if schema.get("readOnly"):
        parts.append("read-only")
    if schema.get("writeOnly"):
        parts.append("write-only")
    return "; ".join(parts)


def _describe(schema: dict) -> str:
    text = schema.get("description", "")
    for part in schema.get("oneOf", []) + schema.get("allOf", []):
        text = text or part.get("description", "")
    extra = _constraints(schema)
    return _cell(_escape(" ".join(x for x in (text, f"({extra})" if extra else "") if x)))


def _operation_label(method: str, path: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return f"api-{method}-{slug}"


def openapi_markdown(schema: dict) -> str:
    out = []
    info = schema["info"]
    out += [f"{_escape(info.get('description', ''))} (OpenAPI {schema['openapi']}, version {info['version']}.)", ""]
    schemes = schema.get("components", {}).get("securitySchemes", {})
    if schemes:
        out += ["Authentication:", ""]
        for name, scheme in sorted(schemes.items()):
            where = f"the `{scheme.get('name')}` {scheme.get('in')}" if scheme.get("in") else scheme.get("scheme", "")
            out.append(
                f"- `{name}`: {where}{': ' + _escape(scheme['description']) if scheme.get('description') else ''}"
            )
        out.append("")
    out += ["## Operations", ""]
    for path, operations in sorted(schema["paths"].items()):
        for method, operation in operations.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            out += [f"({_operation_label(method, path)})=", f"### `{method.upper()} {path}`", ""]
            if operation.get("summary"):
                out += [f"**{_escape(operation['summary'])}**", ""]
            if operation.get("description") and operation.get("description") != operation.get("summary"):
                out += [_escape(operation["description"]), ""]
            parameters = operation.get("parameters", [])
            if parameters:
                out += ["| Parameter | In | Type | Required | Description |", "| --- | --- | --- | --- | --- |"]
                for parameter in sorted(parameters, key=lambda p: (p["in"] != "path", p["name"])):
                    required = "yes" if parameter.get("required") else "no"
                    piece = parameter.get("schema", {})
                    description = _describe({**piece, "description": parameter.get("description", "")})
                    out.append(
                        f"| `{parameter['name']}` | {parameter['in']} | {_type(piece)} | {required} | {description} |"
                    )
                out.append("")
            body = operation.get("requestBody", {}).get("content", {})
            if body:
                media, content = next(iter(body.items()))
                out += [f"Request body (`{media}`): {_type(content.get('schema', {}))}", ""]
            out += ["| Status | Description | Body |", "| --- | --- | --- |"]
            for status, answer in sorted(operation.get("responses", {}).items()):
                content = answer.get("content", {})
                shown = "; ".join(f"{_type(c.get('schema', {}))} (`{m}`)" for m, c in content.items())
                out.append(f"| {status} | {_cell(_escape(answer.get('description', '')))} | {shown} |")
            out.append("")
    out += ["## Schemas", ""]
    for name, component in sorted(schema.get("components", {}).get("schemas", {}).items()):
        out += [f"({_schema_label(name)})=", f"### {name}", ""]
        if component.get("description"):
            out += [_escape(" ".join(component["description"].split())), ""]
        properties = component.get("properties", {})
        if properties:
            required = set(component.get("required", []))
            out += ["| Field | Type | Required | Description |", "| --- | --- | --- | --- |"]
            for field_name, piece in properties.items():
                out.append(
                    f"| `{field_name}` | {_type(piece)} | {'yes' if field_name in required else 'no'} | {_describe(piece)} |"
                )
            out.append("")
        elif "enum" in component:
            out += [_describe(component) or "", ""]
        else:
            out += [f"Type: {_type(component)}", ""]
    return "\n".join(out)


# Sphinx.


def setup(app):
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util import logging
    from sphinx.util.docutils import SphinxDirective

    logger = logging.getLogger(__name__)

    def generated(markdown):
        """A directive whose content is ``markdown(directive)``, parsed as MyST."""

        class Generated(SphinxDirective):
            def run(self):
                container = nodes.section()
                container.document = self.state.document
                lines = StringList(markdown(self).splitlines(), source=f"<generated by {self.name}>")
                self.state.nested_parse(lines, self.content_offset, container, match_titles=True)
                return container.children

        return Generated

    def settings_page(directive) -> str:
        directive.env.note_dependency(str(SETTINGS_YAML))
        for problem in settings_problems():
            logger.warning(f"settings reference: {problem}", location=directive.get_location())
        return settings_markdown()

    def api_page(directive) -> str:
        generated_schema = openapi_schema()
        for warning in generated_schema["warnings"]:
            logger.warning(f"OpenAPI schema: {warning}", location=directive.get_location())
        return openapi_markdown(generated_schema["schema"])

    app.add_directive("shardline-settings", generated(settings_page))
    app.add_directive("shardline-openapi", generated(api_page))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
