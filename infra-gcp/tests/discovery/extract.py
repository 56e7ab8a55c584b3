#!/usr/bin/env python3
"""Writes the parts of Google's discovery documents that infra-gcp's tests hold the
stand-ins and the clients against: for each API, the methods named below and every
schema they reach, with the prose (descriptions) left out.

    python3 extract.py OUT_DIR

The documents are read from the installed google-api-python-client
(googleapiclient/discovery_cache/documents/<api>.<version>.json). The Rust test
`the_committed_discovery_extracts_match_the_installed_documents` checks the files
written here against those documents, field by field, without this script.
"""

import json
import os
import sys

import googleapiclient

# The methods each API's extract keeps: those the stand-ins serve and the backend
# or the official client calls.
METHODS = {
    "storage.v1": [
        "storage.buckets.insert",
        "storage.buckets.get",
        "storage.buckets.patch",
        "storage.buckets.delete",
        "storage.buckets.list",
    ],
    "secretmanager.v1": [
        "secretmanager.projects.secrets.create",
        "secretmanager.projects.secrets.get",
        "secretmanager.projects.secrets.patch",
        "secretmanager.projects.secrets.delete",
        "secretmanager.projects.secrets.list",
        "secretmanager.projects.secrets.addVersion",
        "secretmanager.projects.secrets.versions.get",
        "secretmanager.projects.secrets.versions.access",
        "secretmanager.projects.secrets.versions.list",
    ],
    "artifactregistry.v1": [
        "artifactregistry.projects.locations.repositories.create",
        "artifactregistry.projects.locations.repositories.get",
        "artifactregistry.projects.locations.repositories.patch",
        "artifactregistry.projects.locations.repositories.delete",
        "artifactregistry.projects.locations.repositories.list",
        "artifactregistry.projects.locations.operations.get",
    ],
    "run.v2": [
        "run.projects.locations.services.create",
        "run.projects.locations.services.get",
        "run.projects.locations.services.patch",
        "run.projects.locations.services.delete",
        "run.projects.locations.services.list",
        "run.projects.locations.operations.get",
        "run.projects.locations.services.getIamPolicy",
        "run.projects.locations.services.setIamPolicy",
    ],
    "sqladmin.v1": [
        "sql.instances.insert",
        "sql.instances.get",
        "sql.instances.patch",
        "sql.instances.update",
        "sql.instances.delete",
        "sql.instances.list",
        "sql.users.insert",
        "sql.users.list",
        "sql.users.update",
        "sql.operations.get",
    ],
    "iam.v1": [
        "iam.projects.serviceAccounts.create",
        "iam.projects.serviceAccounts.get",
        "iam.projects.serviceAccounts.patch",
        "iam.projects.serviceAccounts.delete",
        "iam.projects.serviceAccounts.list",
        "iam.projects.serviceAccounts.getIamPolicy",
        "iam.projects.serviceAccounts.setIamPolicy",
    ],
    "cloudresourcemanager.v3": [
        "cloudresourcemanager.projects.get",
        "cloudresourcemanager.projects.getIamPolicy",
        "cloudresourcemanager.projects.setIamPolicy",
    ],
    "pubsub.v1": [
        "pubsub.projects.topics.create",
        "pubsub.projects.topics.get",
        "pubsub.projects.topics.patch",
        "pubsub.projects.topics.delete",
        "pubsub.projects.topics.list",
        "pubsub.projects.subscriptions.create",
        "pubsub.projects.subscriptions.get",
        "pubsub.projects.subscriptions.patch",
        "pubsub.projects.subscriptions.delete",
        "pubsub.projects.subscriptions.list",
        "pubsub.projects.topics.getIamPolicy",
        "pubsub.projects.topics.setIamPolicy",
        "pubsub.projects.subscriptions.getIamPolicy",
        "pubsub.projects.subscriptions.setIamPolicy",
    ],
}

# Schemas no method names by reference but a long-running operation carries as an
# `Any` (its `response` or its `metadata`).
ANY_SCHEMAS = {
    "artifactregistry.v1": ["Repository", "OperationMetadata", "Empty"],
    "run.v2": ["GoogleCloudRunV2Service"],
}

# Prose, which no check reads: a `description` that is text (a field of that name,
# whose value is a schema, stays) and the `enumDescriptions` lists.

# The document's own fields the extract keeps (its methods and schemas aside).
HEADER = ("kind", "name", "version", "revision", "rootUrl", "servicePath", "parameters")


def documents_dir():
    return os.path.join(
        os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents"
    )


def is_prose(key, value):
    if key == "description":
        return isinstance(value, str)
    if key == "enumDescriptions":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False


def without_prose(value):
    if isinstance(value, dict):
        return {k: without_prose(v) for k, v in value.items() if not is_prose(k, v)}
    if isinstance(value, list):
        return [without_prose(v) for v in value]
    return value


def refs(value, found):
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            found.add(value["$ref"])
        for v in value.values():
            refs(v, found)
    elif isinstance(value, list):
        for v in value:
            refs(v, found)


def prune(resources, wanted, kept):
    """The resources holding the wanted methods, nested as in the document."""
    out = {}
    for name, resource in resources.items():
        methods = {
            m: body
            for m, body in resource.get("methods", {}).items()
            if body["id"] in wanted
        }
        nested = prune(resource.get("resources", {}), wanted, kept)
        if methods or nested:
            part = {}
            if methods:
                part["methods"] = methods
                kept.update(body["id"] for body in methods.values())
            if nested:
                part["resources"] = nested
            out[name] = part
    return out


def extract(api, doc):
    wanted = set(METHODS[api])
    kept = set()
    resources = prune(doc["resources"], wanted, kept)
    missing = wanted - kept
    if missing:
        sys.exit(f"{api}: no such methods: {sorted(missing)}")
    names = set(ANY_SCHEMAS.get(api, []))
    refs(resources, names)
    reached = set()
    while names:
        name = names.pop()
        if name in reached:
            continue
        reached.add(name)
        refs(doc["schemas"][name], names)
    out = {k: doc[k] for k in HEADER if k in doc}
    out["resources"] = resources
    out["schemas"] = {n: doc["schemas"][n] for n in sorted(reached)}
    return without_prose(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: extract.py OUT_DIR")
    out_dir = sys.argv[1]
    for api in METHODS:
        with open(os.path.join(documents_dir(), f"{api}.json"), encoding="utf-8") as f:
            doc = json.load(f)
        part = extract(api, doc)
        path = os.path.join(out_dir, f"{api}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(part, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print(f"{path}: {len(part['schemas'])} schemas, revision {part.get('revision')}")


if __name__ == "__main__":
    main()
