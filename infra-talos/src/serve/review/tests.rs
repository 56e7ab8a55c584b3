//! Tests of the redacted review diff: a corpus of realistic secrets never reaches
//! the output, allowlisted changes are shown, and random input neither panics nor
//! shows a value whose key is not allowlisted.

use proptest::prelude::*;

use super::{Change, ReviewDiff, ReviewLine, Shown, harmless, review_diff};

/// A control-plane configuration as a machine runs it, with the secrets Talos
/// generates (every one different from [`CORPUS_DESIRED`]'s).
pub(in crate::serve) const CORPUS_APPLIED: &str = "\
version: v1alpha1 # the schema
debug: false
persist: true
machine:
  type: controlplane
  token: q8xk2m.4vbn7yhz3lp0wert
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJQekNCOHFBREFnRUNBaEVBdlpP
    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd
  certSANs:
    - 10.0.0.10
  env:
    ADMIN_PW: pw9x7q
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.33.2
    defaultRuntimeSeccompProfileEnabled: true
  network:
    hostname: cp-1
    interfaces:
      - interface: eth0
        dhcp: false
        mtu: 1500
        addresses:
          - 10.0.0.10/24
        routes:
          - network: 0.0.0.0/0
            gateway: 10.0.0.1
  install:
    disk: /dev/sda
    image: ghcr.io/siderolabs/installer:v1.10.5
    wipe: false
  registries:
    config:
      registry.example.com:
        auth:
          username: deploy
          password: hunter2
  nodeLabels:
    topology.kubernetes.io/zone: rack-a
    Zk9tQ2xhc3NpZmllZEtleTEyMzQ1Ng==: opaque
cluster:
  id: 8dGxMyRkA1b2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXy=
  secret: Zq3Xv9Lm2Np8Rt5Wy1Bc4Df7Gh0Jk6Ms
  controlPlane:
    endpoint: https://10.0.0.10:6443
  clusterName: lab
  network:
    dnsDomain: cluster.local
    podSubnets:
      - 10.244.0.0/16
    serviceSubnets:
      - 10.96.0.0/12
  token: abcdef.0123456789abcdef
  secretboxEncryptionSecret: 7N2kP9xQ4vR8sT1uW5yZ3aB6cD0eF2gH4iJ6kL8mN0o=
  aescbcEncryptionSecret: Mq1Wn5Er9Ty3Ui7Op2As6Df0Gh4Jk8Lz
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpVENDQVRDZ0F3SUJBZ0lRRmVW
    key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSVBRbWtxZ1NyV3Zm
  serviceAccount:
    key: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBdDNx
  apiServer:
    image: registry.k8s.io/kube-apiserver:v1.33.2
  inlineManifests:
    - name: cilium
      contents: |
        apiVersion: v1
        kind: Secret
        data:
          password: c3VwZXJzZWNyZXRwYXNzd29yZA==
---
apiVersion: v1alpha1
kind: HostnameConfig
hostname: cp-1
";

/// The configuration a plan would apply: new disk and host name, and every secret
/// rotated.
pub(in crate::serve) const CORPUS_DESIRED: &str = "\
version: v1alpha1
debug: false
persist: true
machine:
  type: controlplane
  token: r7wj3n.5ucm8xga4ko1vfty
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJRRENCODZBREFnRUNBaEVBeWtH
    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd2
  certSANs:
    - 10.0.0.10
  env:
    ADMIN_PW: zt4k8v
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.33.3
    defaultRuntimeSeccompProfileEnabled: true
  network:
    hostname: cp-01
    interfaces:
      - interface: eth0
        dhcp: false
        mtu: 9000
        addresses:
          - 10.0.0.10/24
        routes:
          - network: 0.0.0.0/0
            gateway: 10.0.0.1
  install:
    disk: /dev/nvme0n1
    image: ghcr.io/siderolabs/installer:v1.10.5
    wipe: false
  registries:
    config:
      registry.example.com:
        auth:
          username: deploy
          password: \"correct-horse-9\"
  nodeLabels:
    topology.kubernetes.io/zone: rack-b
    Zk9tQ2xhc3NpZmllZEtleTEyMzQ1Ng==: opaque2
cluster:
  id: 8dGxMyRkA1b2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXy=
  secret: Hb6Yc2Vd8Xe4Wf0Tg3Sh7Ri1Qj5Pk9Ol
  controlPlane:
    endpoint: https://10.0.0.10:6443
  clusterName: lab
  network:
    dnsDomain: cluster.local
    podSubnets:
      - 10.244.0.0/16
    serviceSubnets:
      - 10.96.0.0/12
  token: 9m2xq7.k4h8w1z6c3v5b0nl
  secretboxEncryptionSecret: pQ3rS5tU7vW9xY1zA2bC4dE6fG8hI0jK2lM4nO6pQ8r=
  aescbcEncryptionSecret: Lk8Jh4Gf0Ds6Ap2Oi7Uy3Tr9Ew5Qz1Xc
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpakNDQVRDZ0F3SUJBZ0lSQUxx
    key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUxqdXZkWk5HYkZ3
  serviceAccount:
    key: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBeDl3
  apiServer:
    image: registry.k8s.io/kube-apiserver:v1.33.3
  inlineManifests:
    - name: cilium
      contents: |
        apiVersion: v1
        kind: Secret
        data:
          password: bmV3c3VwZXJzZWNyZXRwYXNzd29yZA==
---
apiVersion: v1alpha1
kind: HostnameConfig
hostname: cp-01
";

/// Every secret value of the corpus, on either side.
pub(in crate::serve) const CORPUS_SECRETS: &[&str] = &[
    "q8xk2m.4vbn7yhz3lp0wert",
    "r7wj3n.5ucm8xga4ko1vfty",
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJQekNCOHFBREFnRUNBaEVBdlpP",
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJRRENCODZBREFnRUNBaEVBeWtH",
    "LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd",
    "LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd2",
    "pw9x7q",
    "zt4k8v",
    "hunter2",
    "correct-horse-9",
    "Zk9tQ2xhc3NpZmllZEtleTEyMzQ1Ng==",
    "8dGxMyRkA1b2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXy=",
    "Zq3Xv9Lm2Np8Rt5Wy1Bc4Df7Gh0Jk6Ms",
    "Hb6Yc2Vd8Xe4Wf0Tg3Sh7Ri1Qj5Pk9Ol",
    "abcdef.0123456789abcdef",
    "9m2xq7.k4h8w1z6c3v5b0nl",
    "7N2kP9xQ4vR8sT1uW5yZ3aB6cD0eF2gH4iJ6kL8mN0o=",
    "pQ3rS5tU7vW9xY1zA2bC4dE6fG8hI0jK2lM4nO6pQ8r=",
    "Mq1Wn5Er9Ty3Ui7Op2As6Df0Gh4Jk8Lz",
    "Lk8Jh4Gf0Ds6Ap2Oi7Uy3Tr9Ew5Qz1Xc",
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpVENDQVRDZ0F3SUJBZ0lRRmVW",
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpakNDQVRDZ0F3SUJBZ0lSQUxx",
    "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSVBRbWtxZ1NyV3Zm",
    "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUxqdXZkWk5HYkZ3",
    "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBdDNx",
    "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVBeDl3",
    "c3VwZXJzZWNyZXRwYXNzd29yZA==",
    "bmV3c3VwZXJzZWNyZXRwYXNzd29yZA==",
];

/// The first secret of `CORPUS_SECRETS` of which `output` holds a 6-character
/// piece, with the piece.
pub(in crate::serve) fn leaked_secret(output: &str) -> Option<(&'static str, String)> {
    CORPUS_SECRETS.iter().find_map(|secret| {
        let chars: Vec<char> = secret.chars().collect();
        chars
            .windows(6)
            .map(|w| w.iter().collect::<String>())
            .find(|piece| output.contains(piece.as_str()))
            .map(|piece| (*secret, piece))
    })
}

/// The corpus diff.
pub(in crate::serve) fn corpus_diff() -> ReviewDiff {
    review_diff(Some(CORPUS_APPLIED.as_bytes()), CORPUS_DESIRED.as_bytes())
}

fn line<'a>(diff: &'a ReviewDiff, path: &str, change: Change) -> Option<&'a ReviewLine> {
    diff.lines
        .iter()
        .find(|l| l.path == path && l.change == change)
}

fn shown(diff: &ReviewDiff, path: &str, change: Change) -> Option<String> {
    match line(diff, path, change).map(|l| &l.shown) {
        Some(Shown::Value(v)) => Some(v.clone()),
        _ => None,
    }
}

fn is_withheld(diff: &ReviewDiff, path: &str, change: Change) -> bool {
    matches!(
        line(diff, path, change).map(|l| &l.shown),
        Some(Shown::Withheld { .. })
    )
}

#[test]
fn no_secret_of_the_corpus_reaches_the_output() {
    for diff in [
        corpus_diff(),
        review_diff(None, CORPUS_DESIRED.as_bytes()),
        review_diff(Some(CORPUS_DESIRED.as_bytes()), CORPUS_APPLIED.as_bytes()),
    ] {
        let out = format!("{diff:?}\n{diff:#?}");
        assert_eq!(leaked_secret(&out), None, "{out}");
    }
}

#[test]
fn secrets_that_changed_are_withheld_lines() {
    let diff = corpus_diff();
    for path in [
        "machine.token",
        "machine.ca.crt",
        "machine.ca.key",
        "machine.env.ADMIN_PW",
        "machine.registries.config.registry.example.com.auth.password",
        "cluster.secret",
        "cluster.token",
        "cluster.secretboxEncryptionSecret",
        "cluster.aescbcEncryptionSecret",
        "cluster.ca.crt",
        "cluster.serviceAccount.key",
        "cluster.inlineManifests[0].contents",
        "machine.nodeLabels.<withheld key>",
    ] {
        assert!(is_withheld(&diff, path, Change::Removed), "{path}");
        assert!(is_withheld(&diff, path, Change::Added), "{path}");
    }
}

#[test]
fn disk_host_name_and_other_allowlisted_changes_are_shown() {
    let diff = corpus_diff();
    let pairs = [
        ("machine.install.disk", "/dev/sda", "/dev/nvme0n1"),
        ("machine.network.hostname", "cp-1", "cp-01"),
        ("HostnameConfig.hostname", "cp-1", "cp-01"),
        ("machine.network.interfaces[0].mtu", "1500", "9000"),
        (
            "machine.kubelet.image",
            "ghcr.io/siderolabs/kubelet:v1.33.2",
            "ghcr.io/siderolabs/kubelet:v1.33.3",
        ),
        (
            "cluster.apiServer.image",
            "registry.k8s.io/kube-apiserver:v1.33.2",
            "registry.k8s.io/kube-apiserver:v1.33.3",
        ),
        (
            "machine.nodeLabels.topology.kubernetes.io/zone",
            "rack-a",
            "rack-b",
        ),
    ];
    for (path, old, new) in pairs {
        assert_eq!(
            shown(&diff, path, Change::Removed).as_deref(),
            Some(old),
            "{path}"
        );
        assert_eq!(
            shown(&diff, path, Change::Added).as_deref(),
            Some(new),
            "{path}"
        );
    }
    // The changed MTU sits in a list item: the item's interface name is context.
    assert_eq!(
        shown(
            &diff,
            "machine.network.interfaces[0].interface",
            Change::Context
        )
        .as_deref(),
        Some("eth0")
    );
    // Unchanged values have no line.
    assert!(line(&diff, "cluster.clusterName", Change::Added).is_none());
    assert!(line(&diff, "cluster.id", Change::Added).is_none());
    assert!(diff.unchanged > 20, "{}", diff.unchanged);
    let withheld = diff
        .lines
        .iter()
        .filter(|l| matches!(l.shown, Shown::Withheld { .. }))
        .count();
    assert_eq!(diff.withheld, withheld);
}

#[test]
fn the_review_of_the_corpus_reads_as_expected() {
    let diff = corpus_diff();
    let text: String = diff
        .lines
        .iter()
        .map(|l| {
            let mark = match l.change {
                Change::Added => '+',
                Change::Removed => '-',
                Change::Context => ' ',
            };
            let value = match &l.shown {
                Shown::Value(v) => format!("{v:?}"),
                Shown::Withheld { .. } => "<withheld>".to_owned(),
            };
            format!("{mark} {} = {value}\n", l.path)
        })
        .collect();
    insta::with_settings!({ snapshot_path => "../snapshots" }, {
        insta::assert_snapshot!(format!(
            "{text}withheld {}, unchanged {}\n",
            diff.withheld, diff.unchanged
        ));
    });
}

#[test]
fn without_applied_every_value_is_added() {
    let diff = review_diff(None, CORPUS_DESIRED.as_bytes());
    assert_eq!(diff.unchanged, 0);
    assert!(diff.lines.iter().all(|l| l.change == Change::Added));
    assert_eq!(
        shown(&diff, "machine.install.disk", Change::Added).as_deref(),
        Some("/dev/nvme0n1")
    );
    assert!(is_withheld(&diff, "cluster.secret", Change::Added));
}

#[test]
fn identical_configurations_have_no_lines() {
    let diff = review_diff(Some(CORPUS_DESIRED.as_bytes()), CORPUS_DESIRED.as_bytes());
    assert!(diff.lines.is_empty(), "{diff:?}");
    assert_eq!(diff.withheld, 0);
    assert!(diff.unchanged > 40);
}

#[test]
fn withheld_digests_tell_equal_values_apart_within_a_diff() {
    let old = "a:\n  password: same-old-value\n  token: other\n";
    let new = "a:\n  password: rotated-value\n  token: same-old-value\n";
    let diff = review_diff(Some(old.as_bytes()), new.as_bytes());
    let digest = |path: &str, change| match line(&diff, path, change).map(|l| &l.shown) {
        Some(Shown::Withheld { digest8 }) => digest8.clone(),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(
        digest("a.password", Change::Removed),
        digest("a.token", Change::Added)
    );
    assert_ne!(
        digest("a.password", Change::Removed),
        digest("a.password", Change::Added)
    );
    let d = digest("a.token", Change::Added);
    assert_eq!(d.len(), 8);
    assert!(
        d.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // Not a bare SHA-256, which a dictionary would invert for a short password.
    use sha2::Digest as _;
    let bare = sha2::Sha256::digest(b"same-old-value");
    let bare8: String = bare.iter().take(4).map(|b| format!("{b:02x}")).collect();
    assert_ne!(d, bare8);
}

#[test]
fn sequences_nest_and_may_sit_flush_with_their_key() {
    let text = "\
machine:
  network:
    interfaces:
    - interface: eth0
      addresses: [10.0.0.2/24]
      routes:
      - network: 0.0.0.0/0
        gateway: 10.0.0.1
    - interface: eth1
      dhcp: true
    nameservers:
      - 1.1.1.1
      - - 9.9.9.9
        - 8.8.8.8
  time:
    servers:
    - time.cloudflare.com
";
    let diff = review_diff(None, text.as_bytes());
    let paths: Vec<(&str, Option<&str>)> = diff
        .lines
        .iter()
        .map(|l| {
            let v = match &l.shown {
                Shown::Value(v) => Some(v.as_str()),
                Shown::Withheld { .. } => None,
            };
            (l.path.as_str(), v)
        })
        .collect();
    assert_eq!(
        paths,
        vec![
            (
                "machine.network.interfaces[0].addresses",
                Some("[10.0.0.2/24]")
            ),
            ("machine.network.interfaces[0].interface", Some("eth0")),
            (
                "machine.network.interfaces[0].routes[0].gateway",
                Some("10.0.0.1")
            ),
            (
                "machine.network.interfaces[0].routes[0].network",
                Some("0.0.0.0/0")
            ),
            ("machine.network.interfaces[1].dhcp", Some("true")),
            ("machine.network.interfaces[1].interface", Some("eth1")),
            ("machine.network.nameservers[0]", Some("1.1.1.1")),
            ("machine.network.nameservers[1][0]", Some("9.9.9.9")),
            ("machine.network.nameservers[1][1]", Some("8.8.8.8")),
            ("machine.time.servers[0]", Some("time.cloudflare.com")),
        ]
    );
}

#[test]
fn documents_are_told_apart_by_kind_and_name() {
    let text = "\
---
version: v1alpha1
machine:
  type: worker
---
apiVersion: v1alpha1
kind: UserVolumeConfig
name: ceph-data
provisioning:
  diskSelector:
    match: disk.transport == \"nvme\"
---
apiVersion: v1alpha1
kind: UserVolumeConfig
name: local
---
kind: HostnameConfig
hostname: w-1
---
# only a comment
---
machine:
  type: controlplane
";
    let diff = review_diff(None, text.as_bytes());
    let paths: Vec<&str> = diff.lines.iter().map(|l| l.path.as_str()).collect();
    for p in [
        "version",
        "machine.type",
        "UserVolumeConfig/ceph-data.provisioning.diskSelector.match",
        "UserVolumeConfig/ceph-data.name",
        "UserVolumeConfig/local.kind",
        "HostnameConfig.hostname",
        "document4.machine.type",
    ] {
        assert!(paths.contains(&p), "{p} not in {paths:#?}");
    }
}

#[test]
fn block_scalars_are_one_value_and_withheld_unless_allowlisted() {
    let text = "\
cluster:
  inlineManifests:
    - name: x
      contents: |-
        line one

        hostname: inner
  note: >
    folded text
    more
  hostname: |
    cp-7
after: 1
";
    let diff = review_diff(None, text.as_bytes());
    assert!(is_withheld(
        &diff,
        "cluster.inlineManifests[0].contents",
        Change::Added
    ));
    assert!(is_withheld(&diff, "cluster.note", Change::Added));
    assert_eq!(
        shown(&diff, "cluster.hostname", Change::Added).as_deref(),
        Some("cp-7")
    );
    assert!(
        line(
            &diff,
            "cluster.inlineManifests[0].contents.hostname",
            Change::Added
        )
        .is_none()
    );
    assert!(is_withheld(&diff, "after", Change::Added));
    assert_eq!(diff.lines.len(), 5, "{diff:#?}");
}

#[test]
fn unparsed_lines_and_continuations_are_withheld() {
    let text = "\
machine:
  hostname: cp-1
    token: continued-text
  just some words here
  install:
    disk: /dev/sda
{flow: mapping}
";
    let diff = review_diff(None, text.as_bytes());
    // A continuation line makes the host name's text something else: withheld.
    assert!(is_withheld(&diff, "machine.hostname", Change::Added));
    assert!(is_withheld(&diff, "machine.<unparsed>", Change::Added));
    assert!(is_withheld(&diff, "<unparsed>", Change::Added));
    assert_eq!(
        shown(&diff, "machine.install.disk", Change::Added).as_deref(),
        Some("/dev/sda")
    );
    let out = format!("{diff:?}");
    assert!(
        !out.contains("continued") && !out.contains("words"),
        "{out}"
    );
}

#[test]
fn keys_that_look_secret_are_withheld_but_others_shown() {
    let text = "\
machine:
  nodeLabels:
    0a1b2c3d4e5f67890a1b2c3d4e5f6789: x
    abcdef.0123456789abcdef: y
    allowSchedulingOnControlPlanesEverywhereAtAll: z
  \"quoted key\": 1
cluster:
  allowSchedulingOnControlPlanes: true
";
    let diff = review_diff(None, text.as_bytes());
    let paths: Vec<&str> = diff.lines.iter().map(|l| l.path.as_str()).collect();
    assert!(
        paths.contains(&"machine.nodeLabels.<withheld key>"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"machine.nodeLabels.<withheld key> #2"),
        "{paths:?}"
    );
    assert!(paths.contains(&"machine.nodeLabels.allowSchedulingOnControlPlanesEverywhereAtAll"));
    assert!(paths.contains(&"machine.quoted key"));
    assert_eq!(
        shown(
            &diff,
            "cluster.allowSchedulingOnControlPlanes",
            Change::Added
        )
        .as_deref(),
        Some("true")
    );
    let out = format!("{diff:?}");
    assert!(!out.contains("0a1b2c") && !out.contains("abcdef"), "{out}");
}

#[test]
fn allowlisted_keys_under_secret_containers_are_withheld() {
    let text = "\
machine:
  registries:
    config:
      r.example:
        auth:
          image: fake-image
  acceptedCAs:
    - name: extra
cluster:
  etcd:
    ca:
      type: ed25519
  controlPlane:
    endpoint: https://cp.example:6443
  endpoint: https://elsewhere.example
";
    let diff = review_diff(None, text.as_bytes());
    assert!(is_withheld(
        &diff,
        "machine.registries.config.r.example.auth.image",
        Change::Added
    ));
    assert!(is_withheld(
        &diff,
        "machine.acceptedCAs[0].name",
        Change::Added
    ));
    assert!(is_withheld(&diff, "cluster.etcd.ca.type", Change::Added));
    assert_eq!(
        shown(&diff, "cluster.controlPlane.endpoint", Change::Added).as_deref(),
        Some("https://cp.example:6443")
    );
    assert!(is_withheld(&diff, "cluster.endpoint", Change::Added));
}

#[test]
fn harmless_values() {
    for ok in [
        "/dev/nvme0n1",
        "ghcr.io/siderolabs/installer:v1.10.5",
        "10.0.0.0/8",
        "fd00::/8",
        "true",
        "",
        "https://10.0.0.10:6443",
        "[10.96.0.0/12, fd00:10:96::/112]",
        "\"quoted-host\"",
    ] {
        assert!(harmless(ok), "{ok}");
    }
    for bad in [
        "abcdef.0123456789abcdef",
        "abcdef.ghijklmnopqrstuv",
        "ZXhhbXBsZXNlY3JldA==",
        "0123456789abcdef0123",
        "-----BEGIN CERTIFICATE-----",
        "https://user:pass@registry.example",
        "a: b",
        "x # y",
        "line\nline",
        "Mixed/CaseWordsLongEnough",
        &"a".repeat(129),
    ] {
        assert!(!harmless(bad), "{bad}");
    }
}

#[test]
fn odd_input_never_panics() {
    for text in [
        "",
        "\n\n",
        "---",
        "- ",
        "-",
        "- - - -",
        ":",
        ": :",
        "\"",
        "'a",
        "\"a\":",
        "a: \"b",
        "key: |",
        "key: >+2\n",
        "a:\n\tb: c\n",
        "é: ü\n  ö",
        "  - x\n- y\nz: 1\n    - w",
        "a: # c\n  b: 1",
        "--- !tag\nx: 1\n...\n--- |\n text",
        "\r\n\r\na: b\r\n",
    ] {
        let _ = review_diff(Some(text.as_bytes()), text.as_bytes());
        let _ = review_diff(None, text.as_bytes());
    }
    let _ = review_diff(Some(&[0xff, 0xfe, b':', b' ', 0x80]), &[0xc3, b'\n', 0xa9]);
}

/// Keys whose values the generator treats as allowlisted: a value under one may be
/// shown, and is drawn from an alphabet that cannot hold the marker `QZ`.
const GEN_ALLOWED: &[&str] = &[
    "hostname",
    "disk",
    "image",
    "version",
    "mtu",
    "dhcp",
    "interface",
    "name",
    "kind",
];

/// Keys whose values must never be shown; their values carry the marker `QZ`.
const GEN_SECRET: &[&str] = &[
    "token",
    "secret",
    "key",
    "crt",
    "password",
    "auth",
    "bootstrapToken",
    "aescbcEncryptionSecret",
    "endpoint",
    "username",
    "data",
    "foo",
    "certSANs",
    "extraArgs",
];

/// One generated line.
fn gen_line() -> impl Strategy<Value = String> {
    let indent = (0usize..10).prop_map(|n| " ".repeat(n));
    let dash = prop::bool::weighted(0.25).prop_map(|d| if d { "- " } else { "" });
    let allowed = (prop::sample::select(GEN_ALLOWED), "[a-z0-9./-]{0,20}")
        .prop_map(|(k, v)| format!("{k}: {v}"));
    let secret = (
        prop::sample::select(GEN_SECRET),
        "[a-zA-Z0-9+/=._-]{0,40}",
        prop::sample::select(&["", "\"", "'"][..]),
        prop::bool::ANY,
    )
        .prop_map(|(k, v, q, comment)| {
            let c = if comment { " # QZcomment" } else { "" };
            format!("{k}: {q}QZ{v}{q}{c}")
        });
    let secret_block = prop::sample::select(GEN_SECRET).prop_map(|k| format!("{k}: |"));
    let open =
        prop::sample::select([GEN_ALLOWED, GEN_SECRET].concat()).prop_map(|k| format!("{k}:"));
    let item = "[a-z0-9./-]{1,20}";
    // Text with no colon: never a key; the marker shows if it is shown.
    let garbage = "QZ[^:\n\r]{0,30}";
    let body = prop_oneof![
        3 => allowed,
        3 => secret,
        1 => secret_block,
        2 => open,
        1 => item,
        1 => garbage,
        1 => Just("---".to_owned()),
        1 => Just(String::new()),
    ];
    // A garbage line never gets a dash: as a list item it would be the value of
    // the key above it, which may be allowlisted.
    (indent, dash, body).prop_map(|(i, d, b)| {
        let d = if b.starts_with("QZ") { "" } else { d };
        format!("{i}{d}{b}")
    })
}

fn gen_doc() -> impl Strategy<Value = String> {
    prop::collection::vec(gen_line(), 0..40).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No value of a key off the allowlist (marked `QZ`) is ever shown, whatever
    /// the structure around it, on either side.
    #[test]
    fn values_of_keys_off_the_allowlist_never_show(old in gen_doc(), new in gen_doc()) {
        for diff in [
            review_diff(Some(old.as_bytes()), new.as_bytes()),
            review_diff(None, new.as_bytes()),
        ] {
            let out = format!("{diff:?}");
            prop_assert!(!out.contains("QZ"), "{}\n---\n{}\n---\n{}", old, new, out);
        }
    }

    /// Any bytes at all: no panic, and the counts agree with the lines.
    #[test]
    fn arbitrary_bytes_never_panic(
        old in prop::collection::vec(any::<u8>(), 0..400),
        new in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let diff = review_diff(Some(&old), &new);
        let withheld = diff
            .lines
            .iter()
            .filter(|l| matches!(l.shown, Shown::Withheld { .. }))
            .count();
        prop_assert_eq!(diff.withheld, withheld);
    }

    /// Arbitrary text made of YAML's own punctuation: no panic.
    #[test]
    fn yaml_punctuation_never_panics(text in "[-:|># \"'\n\t a-c{}\\[\\],.!&*?]{0,300}") {
        let _ = review_diff(Some(text.as_bytes()), text.as_bytes());
        let _ = review_diff(None, text.as_bytes());
    }
}
