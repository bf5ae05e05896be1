"""static/vendor/ai/ai.js, the `ai` package bundled for the browser example by scripts/build-ai-bundle: built from the
versions package-lock.json pins, exporting what examples/ai-sdk-chat/browser-bundle.mjs lists, which is what the page
imports. Each test fails on a stale bundle: rebuild it with scripts/build-ai-bundle."""

from __future__ import annotations

import json
import re

from tests.environment import REPO_ROOT

BUNDLE = REPO_ROOT / "static" / "vendor" / "ai" / "ai.js"
ENTRY = REPO_ROOT / "examples" / "ai-sdk-chat" / "browser-bundle.mjs"
PAGE = REPO_ROOT / "runs" / "static" / "deuz" / "examples" / "ai-sdk-chat.js"
REBUILD = "stale: run scripts/build-ai-bundle"


def locked(package: str) -> str:
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text(encoding="utf-8"))
    return lock["packages"][f"node_modules/{package}"]["version"]


def banner() -> str:
    with BUNDLE.open(encoding="utf-8") as bundle:
        return bundle.readline()


def names(export_list: str) -> set[str]:
    """The names an `export { a, b as c }` / `import { a, b }` list makes available (after `as`, when there is one)."""
    return {item.split(" as ")[-1].strip() for item in export_list.split(",") if item.strip()}


def test_the_bundle_was_built_from_the_ai_and_esbuild_versions_the_lockfile_pins():
    match = re.match(r"/\* ai@(\S+) bundled .* \(esbuild@(\S+)\)", banner())
    assert match, f"static/vendor/ai/ai.js has no banner naming its versions: {REBUILD}"
    assert (match.group(1), match.group(2)) == (locked("ai"), locked("esbuild")), REBUILD


def test_the_bundle_exports_what_its_entry_lists():
    entry = names(re.search(r"export \{([^}]*)\} from \"ai\"", ENTRY.read_text(encoding="utf-8")).group(1))
    exported = names(re.findall(r"export\{([^}]*)\};?\s*$", BUNDLE.read_text(encoding="utf-8"))[-1])
    assert exported == entry, REBUILD


def test_the_page_imports_only_what_the_bundle_exports_and_nothing_from_another_origin():
    page = PAGE.read_text(encoding="utf-8")
    imports = re.findall(r'import \{([^}]*)\} from "([^"]+)"', page)
    assert [source for _, source in imports] == ["../../vendor/ai/ai.js"]
    entry = names(re.search(r"export \{([^}]*)\} from \"ai\"", ENTRY.read_text(encoding="utf-8")).group(1))
    assert names(imports[0][0]) <= entry
