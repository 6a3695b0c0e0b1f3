#!/usr/bin/env python3
"""Derives http_activity-<tag>.json, the field list `broker log --format ocsf` is validated against,
from the OCSF schema's sources (https://github.com/ocsf/ocsf-schema, Apache-2.0).

Usage: derive_fields.py SCHEMA_GIT_DIR TAG [CLASS] > CLASS-TAG.json
CLASS: the class's file in the schema, events/network/http_activity.json (the default) or
events/application/api_activity.json (what MCP calls map to).

The class with every attribute it inherits (network, base_event) and includes
(a profile's attributes marked with its name: they are required only of an event that applies the
profile), each with its type, requirement and enum values; and each object those
attributes name, resolved the same way, to the depth DEPTH below the class."""
import json
import subprocess
import sys

DEPTH = 3
git_dir, tag = sys.argv[1], sys.argv[2]
class_path = sys.argv[3] if len(sys.argv) > 3 else "events/network/http_activity.json"
category_path = class_path.rsplit("/", 1)[0] + "/" + class_path.split("/")[-2] + ".json"


def read(path):
    out = subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
                         capture_output=True, check=True, text=True).stdout
    return json.loads(out)


dictionary = read("dictionary.json")["attributes"]
scalar_types = set(read("dictionary.json")["types"]["attributes"]) | {"object"}


def attributes_of(path):
    """The attributes a class or object file declares, with its includes and what it extends."""
    doc = read(path)
    merged = {}
    base = doc.get("extends")
    if base:
        folder = path.rsplit("/", 1)[0]
        candidates = [f"{folder}/{base}.json", f"events/{base}.json", f"objects/{base}.json"]
        for candidate in candidates:
            try:
                merged.update(attributes_of(candidate))
                break
            except subprocess.CalledProcessError:
                continue
    attrs = doc.get("attributes", {})
    for include in attrs.get("$include", []):
        included = read(include)
        # A profile's attributes belong to an event that names the profile in metadata.profiles.
        profile = included.get("name") if included.get("meta") == "profile" else None
        merged.update({k: {**v, "profile": profile} if profile else v
                       for k, v in included.get("attributes", {}).items() if k != "$include"})
    for name, spec in attrs.items():
        if name == "$include":
            continue
        merged[name] = {**merged.get(name, {}), **spec}
    return merged


def field(name, spec):
    entry = dict(dictionary.get(name, {}))
    enum = {**entry.get("enum", {}), **spec.get("enum", {})}
    entry.update(spec)
    if enum:
        entry["enum"] = enum
    out = {"type": entry.get("type", "object"), "requirement": entry.get("requirement", "optional")}
    if entry.get("is_array"):
        out["is_array"] = True
    if entry.get("profile"):
        out["profile"] = entry["profile"]
    if "enum" in entry:
        out["enum"] = sorted(entry["enum"], key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
    return out


def resolve(path, depth, objects):
    fields = {name: field(name, spec) for name, spec in attributes_of(path).items()}
    if depth < DEPTH:
        for f in fields.values():
            t = f["type"]
            if t not in scalar_types and t not in objects:
                objects[t] = None  # claimed: resolved once
                objects[t] = resolve(f"objects/{t}.json", depth + 1, objects)
    return fields


objects = {}
cls = read(class_path)
category = read("categories.json")["attributes"][read(category_path)["category"]]
attributes = resolve(class_path, 0, objects)
# The dictionary leaves these enums to each class: this class has one value each.
attributes["class_uid"]["enum"] = [str(category["uid"] * 1000 + cls["uid"])]
attributes["category_uid"]["enum"] = [str(category["uid"])]
print(json.dumps({
    "source": f"https://github.com/ocsf/ocsf-schema, tag {tag} (Apache-2.0), derived by "
              "tests/integration/ocsf/derive_fields.py",
    "class": cls["name"],
    "class_uid": category["uid"] * 1000 + cls["uid"],
    "category_uid": category["uid"],
    "attributes": attributes,
    "objects": {k: v for k, v in sorted(objects.items()) if v is not None},
}, indent=1, sort_keys=True))
