#!/usr/bin/env python3
"""Google's own Python client (google-api-python-client) as a second client of the
Google Cloud stand-in: each kind's acts, as Google's documents describe them, with
what the real API answers checked on the way.

    python3 drive.py --endpoint http://127.0.0.1:PORT --project PROJECT

Every client is built from the discovery documents the package ships
(static_discovery=True), pointed at the endpoint, with anonymous credentials. For
each (kind, act) whose checks all held, one line of JSON is printed:
{"kind": ..., "act": ...}. The first check that fails ends the run with a message
and exit status 1. Nothing is left behind on the stand-in.
"""

import argparse
import base64
import json
import socket
import sys
import time

import google.auth.credentials
import googleapiclient.discovery
from googleapiclient.errors import HttpError

# A stand-in that stops answering ends the run instead of hanging it.
socket.setdefaulttimeout(30)

REGION = "europe-west1"
MARKER = {"managed-by-infra": "py-client"}


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def checked(kind, act):
    print(json.dumps({"kind": kind, "act": act}), flush=True)


def status_of(call):
    """The HTTP status a call fails with (0 when it succeeds)."""
    try:
        call.execute()
    except HttpError as e:
        return e.resp.status
    return 0


def every_page(collection, request):
    """Every item of every page of a list call, through the client's own paging."""
    pages = 0
    items = []
    while request is not None:
        page = request.execute()
        pages += 1
        items.append(page)
        request = collection.list_next(request, page)
    return items, pages


class Driver:
    def __init__(self, endpoint, project):
        self.endpoint = endpoint.rstrip("/")
        self.project = project
        self.credentials = google.auth.credentials.AnonymousCredentials()

    def build(self, api, version, path="/"):
        return googleapiclient.discovery.build(
            api,
            version,
            static_discovery=True,
            client_options={"api_endpoint": self.endpoint + path},
            credentials=self.credentials,
        )

    @staticmethod
    def wait(fetch, done, what):
        """Fetches until `done` says so; time goes by on the stand-in meanwhile."""
        deadline = time.monotonic() + 30
        while True:
            answer = fetch()
            if done(answer):
                return answer
            expect(time.monotonic() < deadline, f"{what} is still running after 30 s")
            time.sleep(0.05)

    # -- Cloud Storage --------------------------------------------------------------

    def storage(self):
        gcs = self.build("storage", "v1", "/storage/v1/")
        buckets = gcs.buckets()
        name = "py-client-assets"
        made = buckets.insert(
            project=self.project,
            body={
                "name": name,
                "location": REGION,
                "labels": dict(MARKER, team="web", old="x"),
                "versioning": {"enabled": True},
                "lifecycle": {
                    "rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]
                },
            },
        ).execute()
        expect(made["name"] == name, f"insert answered {made.get('name')}")
        expect(made["location"] == REGION.upper(), f"location {made.get('location')}")
        expect(made["metageneration"] == "1", "a new bucket is at metageneration 1")
        expect(made["labels"]["team"] == "web", "the labels sent with the insert are kept")
        checked("objectStore", "create")

        got = buckets.get(bucket=name).execute()
        expect(got["versioning"] == {"enabled": True}, "versioning read back")
        expect(got["lifecycle"]["rule"][0]["condition"]["age"] == 30, "lifecycle read back")
        for field in ("iamConfiguration", "softDeletePolicy", "timeCreated", "etag"):
            expect(field in got, f"a bucket carries {field}")
        checked("objectStore", "read")

        patched = buckets.patch(
            bucket=name,
            ifMetagenerationMatch="1",
            body={"labels": {"team": "ops", "old": None}},
        ).execute()
        expect(patched["labels"] == dict(MARKER, team="ops"), f"labels {patched.get('labels')}")
        expect(patched["metageneration"] == "2", "a patch moves the metageneration on")
        expect(patched["versioning"] == {"enabled": True}, "a labels patch keeps versioning")
        checked("objectStore", "update")

        more = [f"py-client-page-{i}" for i in range(3)]
        for other in more:
            buckets.insert(project=self.project, body={"name": other}).execute()
        pages, count = every_page(
            buckets, buckets.list(project=self.project, prefix="py-client-", maxResults=2)
        )
        listed = [b["name"] for page in pages for b in page.get("items", [])]
        expect(sorted(listed) == sorted(more + [name]), f"listed {listed}")
        expect(count == 2, f"four buckets, two a page: {count} pages")
        checked("objectStore", "list")

        expect(
            status_of(buckets.insert(project=self.project, body={"name": name})) == 409,
            "a taken name is 409",
        )
        expect(
            status_of(buckets.patch(bucket=name, ifMetagenerationMatch="1", body={})) == 412,
            "a stale metageneration is 412",
        )
        checked("objectStore", "error")

        for each in more + [name]:
            buckets.delete(bucket=each).execute()
        expect(status_of(buckets.get(bucket=name)) == 404, "a deleted bucket is 404")
        checked("objectStore", "delete")

    # -- Secret Manager -------------------------------------------------------------

    def secrets(self):
        sm = self.build("secretmanager", "v1")
        secrets = sm.projects().secrets()
        parent = f"projects/{self.project}"
        name = f"{parent}/secrets/py-client-db"
        made = secrets.create(
            parent=parent,
            secretId="py-client-db",
            body={
                "replication": {"userManaged": {"replicas": [{"location": REGION}]}},
                "labels": MARKER,
            },
        ).execute()
        expect(made["name"] == name, f"create answered {made.get('name')}")
        value = base64.b64encode(b"s3cret-value").decode()
        version = secrets.addVersion(
            parent=name, body={"payload": {"data": value}}
        ).execute()
        expect(version["name"] == f"{name}/versions/1", f"version {version.get('name')}")
        expect(version["state"] == "ENABLED", f"a version's state is a name: {version.get('state')!r}")
        checked("secrets", "create")

        got = secrets.get(name=name).execute()
        expect(got["labels"] == MARKER, "labels read back")
        accessed = secrets.versions().access(name=f"{name}/versions/latest").execute()
        expect(
            base64.b64decode(accessed["payload"]["data"]) == b"s3cret-value",
            "the latest version holds the value written",
        )
        checked("secrets", "read")

        patched = secrets.patch(
            name=name, updateMask="labels", body={"labels": dict(MARKER, team="ops")}
        ).execute()
        expect(patched["labels"]["team"] == "ops", "the labels were updated")
        expect(patched["etag"] != got["etag"], "an update gives a new etag")
        checked("secrets", "update")

        for i in range(2):
            secrets.create(
                parent=parent,
                secretId=f"py-client-more-{i}",
                body={"replication": {"automatic": {}}},
            ).execute()
        pages, count = every_page(secrets, secrets.list(parent=parent, pageSize=2))
        listed = [s["name"] for page in pages for s in page.get("secrets", [])]
        expect(name in listed and len(listed) == 3, f"listed {listed}")
        expect(count == 2, f"three secrets, two a page: {count} pages")
        checked("secrets", "list")

        expect(
            status_of(secrets.get(name=f"{parent}/secrets/py-client-none")) == 404,
            "a missing secret is 404",
        )
        expect(
            status_of(secrets.create(parent=parent, secretId="py-client-db", body={"replication": {"automatic": {}}}))
            == 409,
            "a taken id is 409",
        )
        checked("secrets", "error")

        for i in range(2):
            secrets.delete(name=f"{parent}/secrets/py-client-more-{i}").execute()
        secrets.delete(name=name).execute()
        expect(status_of(secrets.get(name=name)) == 404, "a deleted secret is 404")
        checked("secrets", "delete")

    # -- Artifact Registry ----------------------------------------------------------

    def artifacts(self):
        ar = self.build("artifactregistry", "v1")
        location = ar.projects().locations()
        repos = location.repositories()
        parent = f"projects/{self.project}/locations/{REGION}"
        name = f"{parent}/repositories/py-client-images"

        def finish(op):
            expect("metadata" in op, "an operation carries its metadata")
            return self.wait(
                lambda: location.operations().get(name=op["name"]).execute(),
                lambda o: o.get("done"),
                op["name"],
            )

        op = repos.create(
            parent=parent,
            repositoryId="py-client-images",
            body={
                "format": "DOCKER",
                "labels": MARKER,
                "dockerConfig": {"immutableTags": True},
            },
        ).execute()
        done = finish(op)
        expect(done["response"]["name"] == name, "the operation answers the repository")
        expect(done["response"]["format"] == "DOCKER", "the format is a name")
        checked("imageRegistry", "create")

        got = repos.get(name=name).execute()
        expect(got["mode"] == "STANDARD_REPOSITORY", f"mode {got.get('mode')!r}")
        state = got["vulnerabilityScanningConfig"]["enablementState"]
        expect(state == "SCANNING_ACTIVE", f"enablementState {state!r}")
        checked("imageRegistry", "read")

        patched = repos.patch(
            name=name,
            updateMask="labels,dockerConfig.immutableTags",
            body={"labels": dict(MARKER, team="ops"), "dockerConfig": {"immutableTags": False}},
        ).execute()
        expect(patched["labels"]["team"] == "ops", "labels updated")
        expect(not patched["dockerConfig"].get("immutableTags"), "immutable tags turned off")
        checked("imageRegistry", "update")

        extra = [f"py-client-more-{i}" for i in range(2)]
        for each in extra:
            finish(repos.create(parent=parent, repositoryId=each, body={"format": "NPM"}).execute())
        pages, count = every_page(repos, repos.list(parent=parent, pageSize=2))
        listed = [r["name"] for page in pages for r in page.get("repositories", [])]
        expect(name in listed and len(listed) == 3, f"listed {listed}")
        expect(count == 2, f"three repositories, two a page: {count} pages")
        checked("imageRegistry", "list")

        expect(
            status_of(repos.create(parent=parent, repositoryId="py-client-images", body={"format": "DOCKER"}))
            == 409,
            "a taken id is 409",
        )
        expect(status_of(repos.get(name=f"{parent}/repositories/none")) == 404, "missing is 404")
        checked("imageRegistry", "error")

        for each in extra + ["py-client-images"]:
            finish(repos.delete(name=f"{parent}/repositories/{each}").execute())
        expect(status_of(repos.get(name=name)) == 404, "a deleted repository is 404")
        checked("imageRegistry", "delete")

    # -- Cloud Run ------------------------------------------------------------------

    def run(self):
        run = self.build("run", "v2")
        location = run.projects().locations()
        services = location.services()
        parent = f"projects/{self.project}/locations/{REGION}"
        name = f"{parent}/services/py-client-web"
        image = "us-docker.pkg.dev/cloudrun/container/hello"

        def finish(op):
            expect(op["metadata"]["@type"].endswith("google.cloud.run.v2.Service"), "metadata")
            return self.wait(
                lambda: location.operations().get(name=op["name"]).execute(),
                lambda o: o.get("done"),
                op["name"],
            )

        op = services.create(
            parent=parent,
            serviceId="py-client-web",
            body={"labels": MARKER, "template": {"containers": [{"image": image}]}},
        ).execute()
        # Read while the rollout may still run: whichever it is, the service says so
        # consistently (how long the rollout takes is the stand-in's business).
        first = services.get(name=name).execute()
        if first["reconciling"]:
            expect(
                first["terminalCondition"]["state"] == "CONDITION_RECONCILING",
                f"a reconciling service's terminalCondition: {first['terminalCondition']}",
            )
            expect("latestReadyRevision" not in first, "a new service has no ready revision yet")
        else:
            expect(
                first["terminalCondition"]["state"] == "CONDITION_SUCCEEDED",
                f"a service done reconciling is ready: {first['terminalCondition']}",
            )
        done = finish(op)["response"]
        expect(done["ingress"] == "INGRESS_TRAFFIC_ALL", f"ingress {done.get('ingress')!r}")
        checked("compute", "create")

        got = services.get(name=name).execute()
        expect(got["reconciling"] is False, "a rolled out service is not reconciling")
        expect(got["terminalCondition"]["state"] == "CONDITION_SUCCEEDED", "ready")
        expect(got["latestReadyRevision"] == got["latestCreatedRevision"], "the revision is ready")
        expect(
            got["traffic"][0]["type"] == "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST",
            f"traffic {got['traffic']}",
        )
        checked("compute", "read")

        changed = dict(got)
        changed["labels"] = dict(MARKER, team="ops")
        changed["template"] = dict(got["template"], timeout="60s")
        done = finish(services.patch(name=name, body=changed).execute())["response"]
        expect(done["labels"]["team"] == "ops", "labels updated")
        expect(done["template"]["timeout"] == "60s", "the template was changed")
        expect(done["latestReadyRevision"] != got["latestReadyRevision"], "a new revision")
        checked("compute", "update")

        extra = [f"py-client-more-{i}" for i in range(2)]
        for each in extra:
            finish(
                services.create(
                    parent=parent,
                    serviceId=each,
                    body={"template": {"containers": [{"image": image}]}},
                ).execute()
            )
        pages, count = every_page(services, services.list(parent=parent, pageSize=2))
        listed = [s["name"] for page in pages for s in page.get("services", [])]
        expect(name in listed and len(listed) == 3, f"listed {listed}")
        expect(count == 2, f"three services, two a page: {count} pages")
        checked("compute", "list")

        expect(status_of(services.get(name=f"{parent}/services/none")) == 404, "missing is 404")
        expect(
            status_of(
                services.create(
                    parent=parent,
                    serviceId="py-client-web",
                    body={"template": {"containers": [{"image": image}]}},
                )
            )
            == 409,
            "a taken id is 409",
        )
        checked("compute", "error")

        for each in extra + ["py-client-web"]:
            finish(services.delete(name=f"{parent}/services/{each}").execute())
        expect(status_of(services.get(name=name)) == 404, "a deleted service is 404")
        checked("compute", "delete")

    # -- Cloud SQL ------------------------------------------------------------------

    def sql(self):
        sql = self.build("sqladmin", "v1")
        instances = sql.instances()
        project = self.project

        def finish(op):
            expect(op["kind"] == "sql#operation", "a Cloud SQL operation")
            return self.wait(
                lambda: sql.operations().get(project=project, operation=op["name"]).execute(),
                lambda o: o["status"] == "DONE",
                op["name"],
            )

        body = {
            "name": "py-client-pg",
            "region": REGION,
            "databaseVersion": "POSTGRES_15",
            "rootPassword": "not-a-real-password",
            "settings": {"tier": "db-custom-1-3840", "userLabels": MARKER},
        }
        op = instances.insert(project=project, body=body).execute()
        expect(op["status"] in ("PENDING", "RUNNING"), f"status {op.get('status')!r}")
        expect(op["operationType"] == "CREATE", f"operationType {op.get('operationType')!r}")
        finish(op)
        checked("postgres", "create")

        got = instances.get(project=project, instance="py-client-pg").execute()
        expect(got["state"] == "RUNNABLE", f"state {got.get('state')!r}")
        expect(got["databaseVersion"] == "POSTGRES_15", "the version is a name")
        expect(got["settings"]["userLabels"] == MARKER, "labels read back")
        users = sql.users().list(project=project, instance="py-client-pg").execute()
        expect([u["name"] for u in users["items"]] == ["postgres"], "the built-in user")
        checked("postgres", "read")

        finish(
            instances.patch(
                project=project,
                instance="py-client-pg",
                body={"settings": {"userLabels": {"team": "ops"}}},
            ).execute()
        )
        got = instances.get(project=project, instance="py-client-pg").execute()
        expect(got["settings"]["userLabels"] == dict(MARKER, team="ops"), "a patch merges labels")
        checked("postgres", "update")

        finish(instances.insert(project=project, body=dict(body, name="py-client-pg2")).execute())
        pages, count = every_page(instances, instances.list(project=project, maxResults=1))
        listed = [i["name"] for page in pages for i in page.get("items", [])]
        expect(sorted(listed) == ["py-client-pg", "py-client-pg2"], f"listed {listed}")
        expect(count == 2, f"two instances, one a page: {count} pages")
        checked("postgres", "list")

        expect(status_of(instances.insert(project=project, body=body)) == 409, "a taken name is 409")
        expect(status_of(instances.get(project=project, instance="none")) == 404, "missing is 404")
        checked("postgres", "error")

        for each in ("py-client-pg", "py-client-pg2"):
            finish(instances.delete(project=project, instance=each).execute())
        expect(
            status_of(instances.get(project=project, instance="py-client-pg")) == 404,
            "a deleted instance is 404 once its operation is done",
        )
        checked("postgres", "delete")

    # -- IAM and Resource Manager ---------------------------------------------------

    def iam(self):
        iam = self.build("iam", "v1")
        accounts = iam.projects().serviceAccounts()
        parent = f"projects/{self.project}"
        email = f"py-client-runner@{self.project}.iam.gserviceaccount.com"
        name = f"{parent}/serviceAccounts/{email}"
        made = accounts.create(
            name=parent,
            body={
                "accountId": "py-client-runner",
                "serviceAccount": {"displayName": "runner", "description": "made by the client"},
            },
        ).execute()
        expect(made["email"] == email, f"email {made.get('email')}")
        checked("iam", "create")

        got = accounts.get(name=name).execute()
        expect(got["description"] == "made by the client", "description read back")
        checked("iam", "read")

        patched = accounts.patch(
            name=name,
            body={"serviceAccount": {"description": "changed"}, "updateMask": "description"},
        ).execute()
        expect(patched["description"] == "changed", "description updated")
        checked("iam", "update")

        for i in range(2):
            accounts.create(name=parent, body={"accountId": f"py-client-more-{i}"}).execute()
        pages, count = every_page(accounts, accounts.list(name=parent, pageSize=2))
        listed = [a["email"] for page in pages for a in page.get("accounts", [])]
        expect(email in listed and len(listed) == 3, f"listed {listed}")
        expect(count == 2, f"three accounts, two a page: {count} pages")
        checked("iam", "list")

        crm = self.build("cloudresourcemanager", "v3")
        projects = crm.projects()
        project = projects.get(name=parent).execute()
        expect(project["projectId"] == self.project, "the project")
        expect(project["state"] == "ACTIVE", f"state {project.get('state')!r}")
        checked("project", "read")
        policy = projects.getIamPolicy(resource=parent, body={}).execute()
        binding = {"role": "roles/viewer", "members": [f"serviceAccount:{email}"]}
        written = projects.setIamPolicy(
            resource=parent,
            body={"policy": {"bindings": policy.get("bindings", []) + [binding], "etag": policy["etag"]}},
        ).execute()
        expect(binding in written["bindings"], "the binding was written")
        expect(written["etag"] != policy["etag"], "a new policy has a new etag")
        checked("iam", "write-project-policy")
        stale = projects.setIamPolicy(
            resource=parent, body={"policy": {"bindings": [], "etag": policy["etag"]}}
        )
        expect(status_of(stale) == 409, "a stale etag is 409")
        expect(status_of(accounts.get(name=f"{parent}/serviceAccounts/none@x.iam.gserviceaccount.com")) == 404, "missing is 404")
        checked("iam", "error")

        for i in range(2):
            accounts.delete(
                name=f"{parent}/serviceAccounts/py-client-more-{i}@{self.project}.iam.gserviceaccount.com"
            ).execute()
        accounts.delete(name=name).execute()
        expect(status_of(accounts.get(name=name)) == 404, "a deleted account is 404")
        after = projects.getIamPolicy(resource=parent, body={}).execute()
        members = [m for b in after.get("bindings", []) for m in b["members"]]
        expect(
            any(m.startswith(f"deleted:serviceAccount:{email}?uid=") for m in members),
            f"a deleted account's binding stays, as a deleted member: {members}",
        )
        checked("iam", "delete")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument(
        "--only", default="", help="comma-separated: storage,secrets,artifacts,run,sql,iam"
    )
    args = parser.parse_args()
    driver = Driver(args.endpoint, args.project)
    parts = ["storage", "secrets", "artifacts", "run", "sql", "iam"]
    only = [p for p in args.only.split(",") if p] or parts
    for part in only:
        try:
            getattr(driver, part)()
        except CheckFailed as e:
            print(f"{part}: {e}", file=sys.stderr)
            sys.exit(1)
        except HttpError as e:
            print(f"{part}: the stand-in refused a call: {e}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
