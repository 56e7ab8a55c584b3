"""Drives Scaleway's official Python SDK against infra-testkit's Scaleway stand-in.

Every product and act infra-scaleway uses is made through the SDK, as a second client
written by Scaleway: create, get, list across two pages, update, delete, and a read of a
missing id. The SDK fills a field it does not find with a default, so its success proves
little on its own: every JSON answer is also compared with the SDK's own types. A field
the stand-in answers that the type's unmarshalling never reads, or a field the type
declares required (not Optional) that the answer lacks, is a problem; so is any
exception the SDK raises where Scaleway would answer.

    drive.py API_URL PROJECT_ID ORGANIZATION_ID ACCESS_KEY SECRET_KEY

The stand-in must accept exactly the key given (and refuse any other). Prints one JSON
object on the last line of standard output: {"pairs": [[kind, act], ...], "problems":
[...]}; exits 0 only when there is no problem.
"""

import base64
import dataclasses
import inspect
import json
import re
import sys
import time
import typing
import uuid

import requests
import scaleway_core.api as core_api
from scaleway import Client
from scaleway.account.v3 import AccountV3ProjectAPI
from scaleway.container.v1beta1 import ContainerV1Beta1API
from scaleway.function.v1beta1 import FunctionV1Beta1API
from scaleway.function.v1beta1 import types as function_types
from scaleway.iam.v1alpha1 import IamV1Alpha1API
from scaleway.iam.v1alpha1 import types as iam_types
from scaleway.rdb.v1 import RdbV1API
from scaleway.registry.v1 import RegistryV1API
from scaleway.secret.v1beta1 import SecretV1Beta1API
from scaleway_core.api import ScalewayException

import scaleway.account.v3.marshalling as account_m
import scaleway.container.v1beta1.marshalling as container_m
import scaleway.function.v1beta1.marshalling as function_m
import scaleway.iam.v1alpha1.marshalling as iam_m
import scaleway.rdb.v1.marshalling as rdb_m
import scaleway.registry.v1.marshalling as registry_m
import scaleway.secret.v1beta1.marshalling as secret_m

REGION = "fr-par"
PAGE = 2  # a small page size: three items need two pages
ZIP = b"PK\x05\x06" + b"\x00" * 18  # an empty zip archive

PROBLEMS: list[str] = []
PAIRS: set[tuple[str, str]] = set()
ANSWERS: list[tuple[str, str, int, object]] = []  # method, path, status, JSON answer

# ---- every answer the SDK reads, kept for comparison -------------------------------

_request = core_api.API._request


def _recording(self, method, path, params={}, headers={}, body=None):
    response = _request(self, method, path, params=params, headers=headers, body=body)
    try:
        payload = response.json() if response.content else None
    except ValueError:
        payload = None
    ANSWERS.append((method.upper(), path, response.status_code, payload))
    return response


core_api.API._request = _recording


def last_answer():
    return ANSWERS[-1][3]


# ---- what the SDK's types know ------------------------------------------------------

_GET = re.compile(r'data\.get\("(\w+)"')
_ARG = re.compile(r'args\["(\w+)"\]')
_NESTED = re.compile(r"unmarshal_(\w+)\(")


def wire_fields(module, type_name):
    """The wire fields the SDK's unmarshal_<type> reads: {wire name: (attribute,
    nested type or None)}."""
    source = inspect.getsource(getattr(module, f"unmarshal_{type_name}"))
    fields = {}
    chunks = _GET.split(source)
    # chunks: [head, name1, body1, name2, body2, ...]
    for name, body in zip(chunks[1::2], chunks[2::2]):
        attr = _ARG.search(body)
        nested = _NESTED.search(body)
        fields[name] = (attr.group(1) if attr else name, nested.group(1) if nested else None)
    return fields


def required_attributes(module, type_name):
    """The attributes of the SDK's dataclass that are not Optional."""
    types_module = sys.modules[module.__name__.replace(".marshalling", ".types")]
    cls = getattr(types_module, type_name)
    hints = typing.get_type_hints(cls, vars(types_module))
    required = set()
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        optional = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
        if not optional:
            required.add(f.name)
    return required


def check_shape(what, module, type_name, value):
    """Compares a JSON answer with the SDK's type, nested types included."""
    if not isinstance(value, dict):
        PROBLEMS.append(f"{what}: {type_name} answered as {type(value).__name__}")
        return
    known = wire_fields(module, type_name)
    required = required_attributes(module, type_name)
    for name in value:
        if name not in known:
            PROBLEMS.append(f"{what}: `{name}` is not a field of the SDK's {type_name}")
    for name, (attr, nested) in known.items():
        if name not in value:
            if attr in required:
                PROBLEMS.append(f"{what}: required `{name}` of {type_name} is missing")
            continue
        if nested and value[name] is not None:
            items = value[name] if isinstance(value[name], list) else [value[name]]
            for item in items:
                if isinstance(item, dict) and hasattr(module, f"unmarshal_{nested}"):
                    check_shape(f"{what}.{name}", module, nested, item)


def check_last(what, module, type_name):
    check_shape(what, module, type_name, last_answer())


# ---- acts ---------------------------------------------------------------------------


def act(kind, name):
    """Runs one act: notes the pair when it succeeds, the exception as a problem."""

    def wrap(fn):
        try:
            fn()
            PAIRS.add((kind, name))
        except Exception as e:  # noqa: BLE001 — every exception is a problem to report
            PROBLEMS.append(f"{kind} {name}: {type(e).__name__}: {e}")

    return wrap


def expect_missing(kind, call, body_type):
    """A read of a missing id: the SDK raises ScalewayException with 404, and the body is
    Scaleway's: typed (`not_found`) or, for Registry and Serverless, a bare message."""
    try:
        call()
    except ScalewayException as e:
        if e.status_code != 404:
            raise AssertionError(f"a missing id answered {e.status_code}") from e
        body = e.response.json()
        if body_type == "typed" and (body.get("type") != "not_found" or "resource" not in body):
            raise AssertionError(f"not Scaleway's typed not_found: {body}") from e
        if body_type == "bare" and set(body) != {"message"}:
            raise AssertionError(f"not Scaleway's bare not-found message: {body}") from e
        return
    raise AssertionError("a missing id was found")


def until(what, get, done, tries=200):
    """Reads until `done(resource)`, as a client awaiting Scaleway's work does."""
    for _ in range(tries):
        resource = get()
        if done(resource):
            return resource
        time.sleep(0.02)
    raise AssertionError(f"{what} never settled")


def gone(get):
    for _ in range(200):
        try:
            get()
        except ScalewayException as e:
            if e.status_code == 404:
                return
            raise
        time.sleep(0.02)
    raise AssertionError("never gone")


def missing_id():
    return str(uuid.uuid4())


# ---- products -----------------------------------------------------------------------


def account(client, project):
    api = AccountV3ProjectAPI(client)

    @act("account", "read")
    def _():
        api.get_project(project_id=project)
        check_last("get_project", account_m, "Project")

    @act("account", "not-found")
    def _():
        try:
            api.get_project(project_id=missing_id())
        except ScalewayException as e:
            # A project the key cannot see: Scaleway answers not_found of `project_id`.
            body = e.response.json()
            assert e.status_code == 404 and body.get("resource") == "project_id", body
            return
        raise AssertionError("a missing project was found")


def secrets(client, project):
    api = SecretV1Beta1API(client)
    made = []

    @act("secrets", "create")
    def _():
        for i in range(3):
            s = api.create_secret(name=f"sdk-secret-{i}", protected=False, project_id=project,
                                  tags=["k=v"], description="made by the SDK", path="/")
            check_last("create_secret", secret_m, "Secret")
            made.append(s.id)

    @act("secrets", "read")
    def _():
        api.get_secret(secret_id=made[0])
        check_last("get_secret", secret_m, "Secret")

    @act("secrets", "list")
    def _():
        first = api.list_secrets(scheduled_for_deletion=False, project_id=project, page=1, page_size=PAGE)
        check_last("list_secrets", secret_m, "ListSecretsResponse")
        assert len(first.secrets) == PAGE and first.total_count == 3, first
        every = api.list_secrets_all(scheduled_for_deletion=False, project_id=project, page_size=PAGE)
        assert sorted(s.id for s in every) == sorted(made), every

    @act("secrets", "update")
    def _():
        s = api.update_secret(secret_id=made[0], description="changed", tags=["k=w"])
        check_last("update_secret", secret_m, "Secret")
        assert s.description == "changed" and s.tags == ["k=w"], s

    @act("secrets", "add-version")
    def _():
        data = base64.b64encode(b"a value").decode()
        api.create_secret_version(secret_id=made[0], data=data)
        check_last("create_secret_version", secret_m, "SecretVersion")
        api.get_secret_version(secret_id=made[0], revision="1")
        check_last("get_secret_version", secret_m, "SecretVersion")

    @act("secrets", "access")
    def _():
        got = api.access_secret_version(secret_id=made[0], revision="latest_enabled")
        check_last("access_secret_version", secret_m, "AccessSecretVersionResponse")
        assert base64.b64decode(got.data) == b"a value", got.revision

    @act("secrets", "delete")
    def _():
        for sid in made:
            api.delete_secret(secret_id=sid)
        # Deletion is scheduled: Scaleway was recorded answering the secret, with
        # `deletion_requested_at`, after a delete (and sometimes 404 once it is gone).
        try:
            gone_secret = api.get_secret(secret_id=made[0])
        except ScalewayException as e:
            assert e.status_code == 404, e.status_code
        else:
            check_last("get_secret (deleted)", secret_m, "Secret")
            assert gone_secret.deletion_requested_at is not None, gone_secret

    @act("secrets", "not-found")
    def _():
        expect_missing("secrets", lambda: api.get_secret(secret_id=missing_id()), "typed")


def registry(client, project):
    api = RegistryV1API(client)
    made = []

    @act("imageRegistry", "create")
    def _():
        for i in range(3):
            ns = api.create_namespace(name=f"sdk-registry-{i}", description="made by the SDK",
                                      is_public=False, project_id=project)
            check_last("create_namespace", registry_m, "Namespace")
            made.append(ns.id)

    @act("imageRegistry", "read")
    def _():
        api.get_namespace(namespace_id=made[0])
        check_last("get_namespace", registry_m, "Namespace")

    @act("imageRegistry", "list")
    def _():
        first = api.list_namespaces(project_id=project, page=1, page_size=PAGE)
        check_last("list_namespaces", registry_m, "ListNamespacesResponse")
        assert len(first.namespaces) == PAGE and first.total_count == 3, first
        every = api.list_namespaces_all(project_id=project, page_size=PAGE)
        assert sorted(n.id for n in every) == sorted(made)

    @act("imageRegistry", "update")
    def _():
        ns = api.update_namespace(namespace_id=made[0], description="changed")
        check_last("update_namespace", registry_m, "Namespace")
        assert ns.description == "changed", ns

    @act("imageRegistry", "delete")
    def _():
        for nid in made:
            api.delete_namespace(namespace_id=nid)
            check_last("delete_namespace", registry_m, "Namespace")
        gone(lambda: api.get_namespace(namespace_id=made[0]))

    @act("imageRegistry", "not-found")
    def _():
        expect_missing("imageRegistry", lambda: api.get_namespace(namespace_id=missing_id()), "bare")


def rdb(client, project):
    api = RdbV1API(client)
    made = []

    @act("postgres", "list-engines")
    def _():
        api.list_database_engines(name="PostgreSQL")
        check_last("list_database_engines", rdb_m, "ListDatabaseEnginesResponse")

    @act("postgres", "create")
    def _():
        for i in range(3):
            inst = api.create_instance(engine="PostgreSQL-16", user_name="admin", password="Str0ng-Passw0rd!",
                                       node_type="db-dev-s", name=f"sdk-pg-{i}", project_id=project,
                                       is_ha_cluster=False, disable_backup=True, volume_size=20_000_000_000,
                                       backup_same_region=False, volume_type="sbs_5k", tags=["k=v"])
            check_last("create_instance", rdb_m, "Instance")
            made.append(inst.id)
        for iid in made:
            until("the instance", lambda: api.get_instance(instance_id=iid), lambda i: i.status == "ready")

    @act("postgres", "read")
    def _():
        api.get_instance(instance_id=made[0])
        check_last("get_instance", rdb_m, "Instance")

    @act("postgres", "list")
    def _():
        first = api.list_instances(project_id=project, page=1, page_size=PAGE)
        check_last("list_instances", rdb_m, "ListInstancesResponse")
        assert len(first.instances) == PAGE and first.total_count == 3, first
        every = api.list_instances_all(project_id=project, page_size=PAGE)
        assert sorted(i.id for i in every) == sorted(made)

    @act("postgres", "update")
    def _():
        inst = api.update_instance(instance_id=made[0], tags=["k=w"], backup_schedule_retention=10)
        check_last("update_instance", rdb_m, "Instance")
        assert inst.tags == ["k=w"], inst.tags

    @act("postgres", "upgrade")
    def _():
        api.upgrade_instance(instance_id=made[0], volume_size=30_000_000_000)
        check_last("upgrade_instance", rdb_m, "Instance")
        until("the upgrade", lambda: api.get_instance(instance_id=made[0]), lambda i: i.status == "ready")

    @act("postgres", "users")
    def _():
        users = api.list_users(instance_id=made[0])
        check_last("list_users", rdb_m, "ListUsersResponse")
        assert [u.name for u in users.users if u.is_admin] == ["admin"], users
        api.create_user(instance_id=made[0], name="app", password="An0ther-Passw0rd!", is_admin=False)
        check_last("create_user", rdb_m, "User")
        api.update_user(instance_id=made[0], name="app", password="Th1rd-Passw0rd!")
        check_last("update_user", rdb_m, "User")

    @act("postgres", "delete")
    def _():
        for iid in made:
            api.delete_instance(instance_id=iid)
            check_last("delete_instance", rdb_m, "Instance")
        gone(lambda: api.get_instance(instance_id=made[0]))

    @act("postgres", "not-found")
    def _():
        expect_missing("postgres", lambda: api.get_instance(instance_id=missing_id()), "typed")


def iam(client, organization, project):
    api = IamV1Alpha1API(client)
    made = []
    policies = []

    @act("iam", "create")
    def _():
        for i in range(3):
            app = api.create_application(name=f"sdk-app-{i}", description="made by the SDK",
                                         organization_id=organization, tags=["k=v"])
            check_last("create_application", iam_m, "Application")
            made.append(app.id)
        rule = iam_types.RuleSpecs(condition="", permission_set_names=["SecretManagerReadOnly"],
                                   project_ids=[project])
        policy = api.create_policy(description="made by the SDK", name="sdk-policy", organization_id=organization,
                                   rules=[rule], application_id=made[0], tags=["k=v"])
        check_last("create_policy", iam_m, "Policy")
        policies.append(policy.id)

    @act("iam", "read")
    def _():
        api.get_application(application_id=made[0])
        check_last("get_application", iam_m, "Application")
        api.get_policy(policy_id=policies[0])
        check_last("get_policy", iam_m, "Policy")
        rules = api.list_rules(policy_id=policies[0])
        check_last("list_rules", iam_m, "ListRulesResponse")
        assert rules.rules[0].project_ids == [project], rules

    @act("iam", "list")
    def _():
        first = api.list_applications(organization_id=organization, page=1, page_size=PAGE)
        check_last("list_applications", iam_m, "ListApplicationsResponse")
        assert len(first.applications) == PAGE and first.total_count == 3, first
        every = api.list_applications_all(organization_id=organization, page_size=PAGE)
        assert sorted(a.id for a in every) == sorted(made)
        attached = api.list_policies(organization_id=organization, application_ids=[made[0]])
        check_last("list_policies", iam_m, "ListPoliciesResponse")
        assert [p.id for p in attached.policies] == policies, attached
        api.list_permission_sets(organization_id=organization, page_size=PAGE)
        check_last("list_permission_sets", iam_m, "ListPermissionSetsResponse")

    @act("iam", "update")
    def _():
        app = api.update_application(application_id=made[0], description="changed", tags=["k=w"])
        check_last("update_application", iam_m, "Application")
        assert app.description == "changed", app

    @act("iam", "delete")
    def _():
        for pid in policies:
            api.delete_policy(policy_id=pid)
        for aid in made:
            api.delete_application(application_id=aid)
        expect_missing("iam", lambda: api.get_application(application_id=made[0]), "typed")

    @act("iam", "not-found")
    def _():
        expect_missing("iam", lambda: api.get_application(application_id=missing_id()), "typed")


def serverless(client, project, api, m, kind_ns, kind_res, resource, extra):
    """Namespaces and what they hold, for Serverless Functions and Containers alike."""
    namespaces = []
    held = []

    def ready_ns(nid):
        return until("the namespace", lambda: api.get_namespace(namespace_id=nid), lambda n: n.status == "ready")

    @act(kind_ns, "create")
    def _():
        for i in range(3):
            ns = api.create_namespace(name=f"sdk-{resource}-ns-{i}", project_id=project, description="made by the SDK",
                                      environment_variables={"A": "1"}, tags=["k=v"],
                                      secret_environment_variables=[extra["secret"](key="S", value="s")])
            check_last("create_namespace", m, "Namespace")
            namespaces.append(ns.id)
        for nid in namespaces:
            ready_ns(nid)

    @act(kind_ns, "read")
    def _():
        api.get_namespace(namespace_id=namespaces[0])
        check_last("get_namespace", m, "Namespace")

    @act(kind_ns, "list")
    def _():
        first = api.list_namespaces(project_id=project, page=1, page_size=PAGE)
        check_last("list_namespaces", m, "ListNamespacesResponse")
        assert len(first.namespaces) == PAGE and first.total_count == 3, first
        every = api.list_namespaces_all(project_id=project, page_size=PAGE)
        assert sorted(n.id for n in every) == sorted(namespaces)

    @act(kind_ns, "update")
    def _():
        ns = api.update_namespace(namespace_id=namespaces[0], description="changed", tags=["k=w"])
        check_last("update_namespace", m, "Namespace")
        assert ns.description == "changed", ns
        ready_ns(namespaces[0])

    @act(kind_res, "create")
    def _():
        for i in range(3):
            r = extra["create"](namespaces[0], f"sdk-{resource}-{i}")
            check_last(f"create_{resource}", m, extra["type"])
            held.append(r.id)

    @act(kind_res, "deploy")
    def _():
        extra["deploy"](held[0])
        check_last(f"deploy_{resource}", m, extra["type"])
        until(f"the {resource}", lambda: extra["get"](held[0]), lambda r: r.status == "ready")

    @act(kind_res, "read")
    def _():
        extra["get"](held[0])
        check_last(f"get_{resource}", m, extra["type"])

    @act(kind_res, "list")
    def _():
        first = extra["list"](namespace_id=namespaces[0], page=1, page_size=PAGE)
        check_last(f"list_{resource}s", m, extra["list_type"])
        assert len(getattr(first, f"{resource}s")) == PAGE and first.total_count == 3, first
        every = extra["list_all"](namespace_id=namespaces[0], page_size=PAGE)
        assert sorted(r.id for r in every) == sorted(held)

    @act(kind_res, "update")
    def _():
        extra["update"](held[0])
        check_last(f"update_{resource}", m, extra["type"])
        until(f"the {resource}", lambda: extra["get"](held[0]), lambda r: r.status == "ready")

    @act(kind_res, "delete")
    def _():
        for rid in held:
            extra["delete"](rid)
            check_last(f"delete_{resource}", m, extra["type"])
        gone(lambda: extra["get"](held[0]))

    @act(kind_ns, "delete")
    def _():
        for nid in namespaces:
            api.delete_namespace(namespace_id=nid)
            check_last("delete_namespace", m, "Namespace")
        gone(lambda: api.get_namespace(namespace_id=namespaces[0]))

    @act(kind_ns, "not-found")
    def _():
        expect_missing(kind_ns, lambda: api.get_namespace(namespace_id=missing_id()), "bare")

    @act(kind_res, "not-found")
    def _():
        expect_missing(kind_res, lambda: extra["get"](missing_id()), "bare")


def functions(client, project):
    api = FunctionV1Beta1API(client)

    def create(ns, name):
        return api.create_function(namespace_id=ns, name=name, runtime="python312", handler="handler.handle",
                                   memory_limit=256, timeout="60s", min_scale=0, max_scale=2,
                                   environment_variables={"B": "2"}, tags=["k=v"])

    def deploy(fid):
        url = api.get_function_upload_url(function_id=fid, content_length=len(ZIP))
        check_last("get_function_upload_url", function_m, "UploadURL")
        put = requests.put(url.url, data=ZIP, headers={"content-type": "application/octet-stream"})
        assert put.status_code < 300, put.status_code
        return api.deploy_function(function_id=fid)

    serverless(client, project, api, function_m, "functionNamespace", "function", "function", {
        "secret": function_types.Secret,
        "type": "Function",
        "list_type": "ListFunctionsResponse",
        "create": create,
        "deploy": deploy,
        "get": lambda fid: api.get_function(function_id=fid),
        "list": api.list_functions,
        "list_all": api.list_functions_all,
        "update": lambda fid: api.update_function(function_id=fid, memory_limit=512, redeploy=True),
        "delete": lambda fid: api.delete_function(function_id=fid),
    })


def containers(client, project):
    from scaleway.container.v1beta1 import types as container_types

    api = ContainerV1Beta1API(client)

    def create(ns, name):
        return api.create_container(namespace_id=ns, name=name, registry_image="rg.fr-par.scw.cloud/ns/app:1",
                                    port=8080, cpu_limit=1000, memory_limit=2048, min_scale=0, max_scale=2,
                                    timeout="60s", environment_variables={"B": "2"}, tags=["k=v"])

    serverless(client, project, api, container_m, "containerNamespace", "container", "container", {
        "secret": container_types.Secret,
        "type": "Container",
        "list_type": "ListContainersResponse",
        "create": create,
        "deploy": lambda cid: api.deploy_container(container_id=cid),
        "get": lambda cid: api.get_container(container_id=cid),
        "list": api.list_containers,
        "list_all": api.list_containers_all,
        "update": lambda cid: api.update_container(container_id=cid, registry_image="rg.fr-par.scw.cloud/ns/app:2",
                                                   redeploy=True),
        "delete": lambda cid: api.delete_container(container_id=cid),
    })


def keys(api_url, project, access, secret):
    """A key of the right shape that is not the stand-in's is refused as Scaleway refuses
    it; a malformed one never leaves the SDK; a malformed token sent anyway is refused."""

    @act("account", "denied-key")
    def _():
        other = Client(access_key=access, secret_key=str(uuid.uuid4()), default_project_id=project,
                       default_region=REGION, api_url=api_url)
        try:
            AccountV3ProjectAPI(other).get_project(project_id=project)
        except ScalewayException as e:
            body = e.response.json()
            assert e.status_code == 401, e.status_code
            assert body.get("type") == "denied_authentication" and body.get("reason") == "not_found", body
        else:
            raise AssertionError("a key that is not the stand-in's was accepted")
        try:
            Client(access_key=access, secret_key="stand-in", default_project_id=project,
                   default_region=REGION, api_url=api_url).validate()
        except ValueError:
            pass
        else:
            raise AssertionError("the SDK took a secret key that is not a UUID")
        raw = requests.get(f"{api_url}/account/v3/projects/{project}", headers={"x-auth-token": "stand-in"})
        body = raw.json()
        assert raw.status_code == 401 and body.get("reason") == "invalid_argument", body


def main():
    api_url, project, organization, access, secret = sys.argv[1:6]
    client = Client(access_key=access, secret_key=secret, default_project_id=project,
                    default_organization_id=organization, default_region=REGION, api_url=api_url)
    account(client, project)
    keys(api_url, project, access, secret)
    secrets(client, project)
    registry(client, project)
    rdb(client, project)
    iam(client, organization, project)
    functions(client, project)
    containers(client, project)
    print(json.dumps({"pairs": sorted(PAIRS), "problems": PROBLEMS}))
    sys.exit(1 if PROBLEMS else 0)


if __name__ == "__main__":
    main()
