//! Identities through the commands: the installation's bootstrap (`init`), the
//! principal acts (`principal add`, `roles`, `certificate`, `journal`), and how a
//! command learns who is acting.
//!
//! **Who acts.** A command that acts is given a client certificate and its private
//! key (`--certificate`, `--private-key`, or `certificate` and `private_key` in the
//! configuration file) and the role to act in (`--as`, or `role`). The certificate
//! must chain to the authority the store's bootstrap recorded, for client
//! authentication, at the present time, and the key must be its own; the subject's
//! common name is the acting principal. No environment variable names an identity:
//! `INFRA_TALOS_ACTOR` and `INFRA_TALOS_ROLE` are refused where they are set, so a
//! script that still sets them stops instead of acting as someone else.
//!
//! **The authority.** `init --pki DIR` makes the installation's own authority and
//! the administrator's certificate in `DIR` (`ca.crt`, `ca.key`, `<admin>.crt`,
//! `<admin>.key`; keys readable by their owner only, no file ever overwritten);
//! `init --ca-certificate FILE` records an existing authority instead, which then
//! issues every certificate itself. With the installation's own authority,
//! `principal add --pki DIR` and `principal certificate NAME --pki DIR` issue a
//! principal's certificate from `DIR/ca.key`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{Config, Failure, parse_role, pretty, who};
use crate::acts::Acts;
use crate::cli::database::Db;
use crate::contract::Role;
use crate::identity::{
    Authority, DeniedList, Fingerprint, Refusal, admit, authenticate, check_authority,
    issue_client, issued_certificate, valid_identifier,
};
use crate::store::{
    Actor, ApprovalPolicy, BootstrapSpec, CertificateOrigin, PrincipalKind, PrincipalSpec, Store,
};

/// How long an issued client certificate is valid by default, in days.
const DEFAULT_DAYS: u64 = 90;

/// `init`: bootstrap the installation's identities, once.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The first administrator: a person holding recovery-admin.
    #[arg(long)]
    pub admin: String,
    /// Make the installation's own authority, and the administrator's certificate,
    /// in this directory (which must not already hold them).
    #[arg(
        long,
        required_unless_present = "ca_certificate",
        conflicts_with = "ca_certificate"
    )]
    pub pki: Option<PathBuf>,
    /// Record an existing authority (PEM) instead; it issues every certificate.
    #[arg(long)]
    pub ca_certificate: Option<PathBuf>,
    /// With `--ca-certificate`: the administrator's certificate (PEM) that authority
    /// issued, bound to it by the bootstrap. Without it, the administrator binds its
    /// own afterwards (`principal bind-certificate`, on the store, while no
    /// certificate is bound).
    #[arg(long, requires = "ca_certificate", value_name = "FILE")]
    pub admin_certificate: Option<PathBuf>,
    /// How long the administrator's certificate is valid, in days.
    #[arg(long, default_value_t = DEFAULT_DAYS)]
    pub days: u64,
    /// Whether approvals need a second person (`yes` or `no`): with `yes`, an
    /// approver may not approve a plan it created, or whose release it authored
    /// content in (or is responsible for a token that did). Without it, `init` asks
    /// when run at a terminal, and otherwise keeps the contract's reading, `no`
    /// (such an approval is recorded, marked self-approval).
    #[arg(long, value_name = "yes|no", value_parser = parse_yes_no)]
    pub approvals_need_second_person: Option<bool>,
}

fn parse_yes_no(text: &str) -> Result<bool, String> {
    match text {
        "yes" => Ok(true),
        "no" => Ok(false),
        other => Err(format!("{other:?} is neither yes nor no")),
    }
}

fn policy_of(second_person: bool) -> ApprovalPolicy {
    if second_person {
        ApprovalPolicy::SecondPerson
    } else {
        ApprovalPolicy::SelfApprovalMarked
    }
}

/// Asks what `init`'s flags leave unanswered (whether approvals need a second
/// person), of a person at a terminal: `input` is read, `prompt` written.
pub(super) fn ask_unanswered(
    args: &mut InitArgs,
    input: &mut dyn std::io::BufRead,
    prompt: &mut dyn std::io::Write,
) -> Result<(), Failure> {
    if args.approvals_need_second_person.is_none() {
        let policy = ask_policy(input, prompt)?;
        args.approvals_need_second_person = Some(policy.needs_second_person());
    }
    Ok(())
}

/// Asks whether approvals need a second person until answered `yes`, `no`, or
/// nothing (the contract's reading, `no`); the end of input is `no` too.
pub(super) fn ask_policy(
    input: &mut dyn std::io::BufRead,
    prompt: &mut dyn std::io::Write,
) -> Result<ApprovalPolicy, Failure> {
    let failed = |e: std::io::Error| Failure::Usage(format!("cannot ask: {e}"));
    loop {
        write!(
            prompt,
            "Do approvals need a second person? With yes, no one may approve a plan they \
             made or whose release they authored content in. [yes/no, default no] "
        )
        .and_then(|()| prompt.flush())
        .map_err(failed)?;
        let mut line = String::new();
        if input.read_line(&mut line).map_err(failed)? == 0 {
            return Ok(ApprovalPolicy::default());
        }
        match line.trim() {
            "" | "no" | "n" => return Ok(ApprovalPolicy::SelfApprovalMarked),
            "yes" | "y" => return Ok(ApprovalPolicy::SecondPerson),
            _ => {}
        }
    }
}

/// `principal` subcommands.
#[derive(Debug, Subcommand)]
pub enum PrincipalCommand {
    /// Register an identity (recovery-admin).
    Add {
        /// Its identifier: what its certificate's common name will be.
        id: String,
        /// A role it holds (repeat for several).
        #[arg(long = "role", value_parser = parse_role, required = true)]
        roles: Vec<Role>,
        /// An automation token rather than a person.
        #[arg(long)]
        token: bool,
        /// For a token: the person its issuing record holds responsible.
        #[arg(long, requires = "token")]
        responsible: Option<String>,
        /// Issue its client certificate from the installation's authority in this
        /// directory (`ca.crt`, `ca.key`), written there as `<id>.crt` and `<id>.key`.
        #[arg(long)]
        pki: Option<PathBuf>,
        /// How long that certificate is valid, in days.
        #[arg(long, default_value_t = DEFAULT_DAYS)]
        days: u64,
    },
    /// Replace a principal's roles (recovery-admin; never one's own).
    Roles {
        /// The principal.
        id: String,
        /// A role it is to hold (repeat for several).
        #[arg(long = "role", value_parser = parse_role, required = true)]
        roles: Vec<Role>,
    },
    /// Issue a registered principal a new client certificate (recovery-admin), from
    /// the installation's authority in `--pki`.
    Certificate {
        /// The principal.
        id: String,
        /// The directory holding `ca.crt` and `ca.key`; the certificate is written
        /// there as `<id>.crt` and `<id>.key` (which must not exist yet).
        #[arg(long)]
        pki: PathBuf,
        /// How long it is valid, in days.
        #[arg(long, default_value_t = DEFAULT_DAYS)]
        days: u64,
    },
    /// Bind an existing certificate file to its principal (recovery-admin),
    /// journaled: a certificate issued before certificates were bound (schema
    /// version 9 and older) is refused until it is bound. On an installation where
    /// no certificate is bound yet, an administrator may bind the certificate it
    /// presents, on the store (`--database`), to take the first step.
    BindCertificate {
        /// The principal its subject names.
        id: String,
        /// The certificate file (PEM); no key is read.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// The identity journal: the bootstrap and every act on principals since.
    Journal {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The acting principal the configuration's certificate proves, in the role it
/// asks for; `Err` with why not.
pub(super) async fn acting(config: &Config, store: &dyn Store) -> Result<Proven, String> {
    let (Some(cert), Some(key)) = (&config.certificate, &config.private_key) else {
        return Err("no acting identity: give a client certificate and its key \
                    (--certificate and --private-key, or `certificate` and `private_key` \
                    in the configuration)"
            .into());
    };
    let Some(role) = &config.role else {
        return Err("no acting role: give --as ROLE (or `role` in the configuration)".into());
    };
    let role = parse_role(role)?;
    let identity = store
        .installation_identity()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the store has no identity root yet: bootstrap it with `infra-talos init`")?;
    let cert_pem = read(cert)?;
    let key_pem = zeroize::Zeroizing::new(read(key)?);
    let principal = authenticate(
        &identity.ca_certificate,
        &cert_pem,
        &key_pem,
        super::when::wall_now(),
    )
    .map_err(|e| format!("{}: {e}", cert.display()))?;
    let fingerprint = Fingerprint::of_pem(&cert_pem).map_err(|e| e.to_string())?;
    let denied = match config.denied_list() {
        Some(list) => Some(list.read().map_err(|e| e.to_string())?),
        None => None,
    };
    let bindings = store.certificates().await.map_err(|e| e.to_string())?;
    let actor = Actor::new(principal, role);
    match admit(&actor.id, &fingerprint, &bindings, denied.as_ref()) {
        Ok(()) => Ok(Proven::Admitted(actor)),
        Err(e @ Refusal::Unbound { .. }) if bindings.is_empty() => Ok(Proven::FirstBinding {
            refusal: format!("{}: {e}", cert.display()),
            actor,
            fingerprint,
        }),
        Err(e) => Err(format!("{}: {e}", cert.display())),
    }
}

/// A principal a certificate and key prove, as the command line admits it.
#[derive(Debug, Clone)]
pub(super) enum Proven {
    /// Its certificate is bound to it: it acts.
    Admitted(Actor),
    /// Its certificate is bound to no one, on an installation where no certificate
    /// is bound at all (one upgraded from schema version 9): it may only bind the
    /// certificate it presents, on the store; every other act is refused, saying
    /// why.
    FirstBinding {
        /// Who it would be.
        actor: Actor,
        /// The certificate it presented.
        fingerprint: Fingerprint,
        /// The refusal of every other act.
        refusal: String,
    },
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n.saturating_mul(86_400))
}

/// `init`.
pub(super) async fn init(
    db: &Db,
    args: InitArgs,
    denied: Option<&DeniedList>,
) -> Result<String, Failure> {
    if !valid_identifier(&args.admin) {
        return Err(Failure::Usage(format!(
            "{:?} is not a principal identifier (1 to 128 of A-Z a-z 0-9 . _ @ -)",
            args.admin
        )));
    }
    let administrator = PrincipalSpec {
        id: args.admin.clone(),
        kind: PrincipalKind::Human,
        roles: vec![Role::RecoveryAdmin],
    };
    // Unanswered (no flag, no terminal): the contract's reading.
    let approval_policy = args
        .approvals_need_second_person
        .map_or_else(ApprovalPolicy::default, policy_of);
    let mut out = String::new();
    match (&args.pki, &args.ca_certificate) {
        (Some(dir), _) => {
            let now = super::when::wall_now();
            let authority = Authority::generate("infra-talos installation", now)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            let admin = issue_client(
                &authority.certificate_pem,
                &authority.key_pem,
                &args.admin,
                now,
                days(args.days),
            )
            .map_err(|e| Failure::Usage(e.to_string()))?;
            let files = [
                (
                    dir.join("ca.crt"),
                    authority.certificate_pem.as_str(),
                    false,
                ),
                (dir.join("ca.key"), authority.key_pem.as_str(), true),
                (
                    dir.join(format!("{}.crt", args.admin)),
                    admin.certificate_pem.as_str(),
                    false,
                ),
                (
                    dir.join(format!("{}.key", args.admin)),
                    admin.key_pem.as_str(),
                    true,
                ),
            ];
            // The files first, so an authority the store records always has its key on
            // disk; if the store refuses, the files this run wrote are removed.
            let written = write_all_new(dir, &files)?;
            let admin_fingerprint = Fingerprint::of_pem(&admin.certificate_pem)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            let spec = BootstrapSpec {
                ca_certificate: authority.certificate_pem.clone(),
                administrator,
                approval_policy,
                administrator_certificate: Some(admin_fingerprint.hex()),
            };
            if let Err(e) = db.store.bootstrap(spec).await {
                for path in &written {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e.into());
            }
            let _ = writeln!(
                out,
                "installation bootstrapped: {} is its first administrator (recovery-admin)\n\
                 certificate authority: {} (keep {} offline: it issues every identity)\n\
                 {}'s certificate: {} and {}",
                args.admin,
                files[0].0.display(),
                files[1].0.display(),
                args.admin,
                files[2].0.display(),
                files[3].0.display(),
            );
        }
        (None, Some(file)) => {
            let pem = read(file).map_err(Failure::Usage)?;
            check_authority(&pem).map_err(|e| Failure::Usage(e.to_string()))?;
            let administrator_certificate = match &args.admin_certificate {
                Some(path) => Some(admin_certificate(&pem, path, &args.admin)?),
                None => None,
            };
            db.store
                .bootstrap(BootstrapSpec {
                    ca_certificate: pem,
                    administrator,
                    approval_policy,
                    administrator_certificate: administrator_certificate.map(|f| f.hex()),
                })
                .await?;
            let _ = writeln!(
                out,
                "installation bootstrapped: {} is its first administrator (recovery-admin)\n\
                 certificate authority: {} (it issues every identity's certificate)",
                args.admin,
                file.display()
            );
        }
        (None, None) => return Err(Failure::Usage("give --pki or --ca-certificate".into())),
    }
    let _ = writeln!(out, "{approval_policy}");
    out += &make_denied_list(denied)?;
    Ok(out)
}

/// `principal …`.
pub(super) async fn principal(
    acts: &dyn Acts,
    command: PrincipalCommand,
) -> Result<String, Failure> {
    let mut out = String::new();
    match command {
        PrincipalCommand::Add {
            id,
            roles,
            token,
            responsible,
            pki,
            days: valid,
        } => {
            let actor = acts.actor()?;
            let kind = if token {
                PrincipalKind::Token { responsible }
            } else {
                PrincipalKind::Human
            };
            let names: Vec<String> = roles.iter().map(ToString::to_string).collect();
            acts.register_principal(PrincipalSpec {
                id: id.clone(),
                kind,
                roles,
            })
            .await?;
            let _ = writeln!(
                out,
                "principal {id} registered by {}: {}",
                who(&actor),
                names.join(", ")
            );
            if let Some(dir) = pki {
                out += &issue_into(acts, &dir, &id, valid).await?;
            }
        }
        PrincipalCommand::Roles { id, roles } => {
            let actor = acts.actor()?;
            let names: Vec<String> = roles.iter().map(ToString::to_string).collect();
            acts.change_roles(&id, roles).await?;
            let _ = writeln!(
                out,
                "principal {id} now holds {} (changed by {})",
                names.join(", "),
                who(&actor)
            );
        }
        PrincipalCommand::Certificate {
            id,
            pki,
            days: valid,
        } => {
            let actor = acts.actor()?;
            // Only an administrator issues, and only for a principal the store holds
            // unrevoked: a certificate for anyone else would name no one.
            if actor.role != Role::RecoveryAdmin {
                return Err(Failure::Refused(
                    "refused: issuing a certificate: recovery-admin issues certificates".into(),
                ));
            }
            let held = acts.principals().await?;
            if !held.iter().any(|p| p.id == id && !p.revoked) {
                return Err(Failure::Refused(format!(
                    "refused: issuing a certificate: {id} is not a registered, unrevoked principal"
                )));
            }
            out += &issue_into(acts, &pki, &id, valid).await?;
        }
        PrincipalCommand::BindCertificate {
            id,
            file: certificate,
        } => {
            let actor = acts.actor()?;
            let pem = read(&certificate).map_err(Failure::Usage)?;
            let fingerprint = acts
                .bind_certificate(&id, &pem, CertificateOrigin::Existing)
                .await?;
            let _ = writeln!(
                out,
                "certificate {fingerprint} ({}) bound to {id} by {}",
                certificate.display(),
                who(&actor)
            );
        }
        PrincipalCommand::Journal { json } => {
            let journal = acts.identity_journal().await?;
            if json {
                let _ = writeln!(out, "{}", pretty(&journal));
            } else if journal.is_empty() {
                let _ = writeln!(
                    out,
                    "no identity acts: the installation is not bootstrapped"
                );
            }
            for e in journal.iter().filter(|_| !json) {
                let detail = if e.detail.is_empty() {
                    String::new()
                } else {
                    format!("  {}", e.detail)
                };
                let _ = writeln!(
                    out,
                    "{:>4}  {}  {:<17}  {} by {} ({}){detail}",
                    e.seq,
                    super::iso(e.at.0),
                    e.kind.name(),
                    e.principal,
                    e.actor,
                    e.actor_role,
                );
            }
        }
    }
    Ok(out)
}

/// Issues `id` a certificate from the authority in `dir`, written there, and binds
/// it to `id` in a journaled act; if the act is refused, the files written are
/// removed, so no certificate the store does not bind is left behind.
async fn issue_into(acts: &dyn Acts, dir: &Path, id: &str, valid: u64) -> Result<String, Failure> {
    let ca_cert = read(&dir.join("ca.crt")).map_err(Failure::Usage)?;
    let ca_key = zeroize::Zeroizing::new(read(&dir.join("ca.key")).map_err(Failure::Usage)?);
    let issued = issue_client(&ca_cert, &ca_key, id, super::when::wall_now(), days(valid))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let cert = dir.join(format!("{id}.crt"));
    let key = dir.join(format!("{id}.key"));
    let written = write_all_new(
        dir,
        &[
            (cert.clone(), issued.certificate_pem.as_str(), false),
            (key.clone(), issued.key_pem.as_str(), true),
        ],
    )?;
    let fingerprint = match acts
        .bind_certificate(id, &issued.certificate_pem, CertificateOrigin::Issued)
        .await
    {
        Ok(fingerprint) => fingerprint,
        Err(e) => {
            for path in &written {
                let _ = std::fs::remove_file(path);
            }
            return Err(e.into());
        }
    };
    Ok(format!(
        "{id}'s certificate: {} and {} (valid {valid} days; {fingerprint}, journaled)\n",
        cert.display(),
        key.display()
    ))
}

/// The fingerprint of the administrator's certificate in `path`, once it is read
/// as one the authority `ca_pem` issued to `admin`.
fn admin_certificate(ca_pem: &str, path: &Path, admin: &str) -> Result<Fingerprint, Failure> {
    let pem = read(path).map_err(Failure::Usage)?;
    let issued = issued_certificate(ca_pem, &pem)
        .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    if issued.principal != admin {
        return Err(Failure::Usage(format!(
            "{}: the certificate names {}, not the administrator {admin}",
            path.display(),
            issued.principal
        )));
    }
    Ok(issued.fingerprint)
}

/// Makes the configured denied-subject list if it does not exist yet, and says so.
fn make_denied_list(denied: Option<&DeniedList>) -> Result<String, Failure> {
    let Some(list) = denied else {
        return Ok(
            "no denied-subject list is configured (`denied_subjects`): a database \
                   restore could undo a revocation\n"
                .into(),
        );
    };
    let made = list
        .create_if_missing()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(format!(
        "denied-subject list: {} ({}; keep it, and back it up, apart from the database)\n",
        list.path().display(),
        if made {
            "made, empty"
        } else {
            "exists already"
        }
    ))
}

/// `principal bind-certificate` by an administrator whose own certificate is not
/// bound, on an installation where none is (one upgraded from schema version 9):
/// only the certificate it presents, to itself.
pub(super) async fn bind_first(
    acts: &dyn Acts,
    presented: &Fingerprint,
    id: &str,
    certificate: &Path,
) -> Result<String, Failure> {
    let actor = acts.actor()?;
    let pem = read(certificate).map_err(Failure::Usage)?;
    let file = Fingerprint::of_pem(&pem).map_err(|e| Failure::Usage(e.to_string()))?;
    if id != actor.id || file != *presented {
        return Err(Failure::Refused(format!(
            "refused: binding a certificate: no certificate is bound on this installation \
             yet, so the first binding is of the certificate you present ({presented}), to \
             yourself ({}); bind it first, then the others'",
            actor.id
        )));
    }
    let fingerprint = acts
        .bind_certificate(id, &pem, CertificateOrigin::Existing)
        .await?;
    Ok(format!(
        "certificate {fingerprint} ({}) bound to {id} by {} (the installation's first binding)\n",
        certificate.display(),
        who(&actor)
    ))
}

/// Writes each new file (a private one readable by its owner only); refuses, before
/// writing any, if one exists. Returns the paths written.
pub(super) fn write_all_new(
    dir: &Path,
    files: &[(PathBuf, &str, bool)],
) -> Result<Vec<PathBuf>, Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Usage(format!("cannot make {}: {e}", dir.display())))?;
    if let Some((path, ..)) = files.iter().find(|(p, ..)| p.exists()) {
        return Err(Failure::Usage(format!(
            "{} exists already: nothing was written (no certificate or key is ever overwritten)",
            path.display()
        )));
    }
    let mut written = Vec::new();
    for (path, text, private) in files {
        if let Err(e) = write_new(path, text, *private) {
            for done in &written {
                let _ = std::fs::remove_file(done);
            }
            return Err(Failure::Usage(format!(
                "cannot write {}: {e}",
                path.display()
            )));
        }
        written.push(path.clone());
    }
    Ok(written)
}

fn write_new(path: &Path, text: &str, private: bool) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::ask_policy;
    use crate::store::ApprovalPolicy;

    #[test]
    fn init_asks_until_answered_and_defaults_to_the_contracts_reading() {
        for (typed, expected) in [
            ("yes\n", ApprovalPolicy::SecondPerson),
            ("maybe\ny\n", ApprovalPolicy::SecondPerson),
            ("no\n", ApprovalPolicy::SelfApprovalMarked),
            ("\n", ApprovalPolicy::SelfApprovalMarked),
            ("", ApprovalPolicy::SelfApprovalMarked),
        ] {
            let mut prompt = Vec::new();
            let got = ask_policy(&mut typed.as_bytes(), &mut prompt).unwrap();
            assert_eq!(got, expected, "{typed:?}");
            let asked = String::from_utf8(prompt).unwrap();
            let times = asked.matches("Do approvals need a second person?").count();
            assert_eq!(
                times,
                1 + usize::from(typed.starts_with("maybe")),
                "{asked}"
            );
        }
    }
}
