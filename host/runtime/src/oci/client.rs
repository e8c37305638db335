//! How registries are reached: plain HTTP only for this machine or what
//! the operator named, bounded waits, and credentials for one registry.

use std::time::Duration;

use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

use super::error::OciError;
use super::reference::{OciRef, SCHEME};

/// How long a registry may take to accept a connection: a registry that
/// does not answer in this time is treated as unreachable (the cache is used).
pub const REGISTRY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a registry may go without sending a byte: a stalled pull must
/// not hang the host's start-up forever.
pub const REGISTRY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Variables that give registry credentials, before the Docker config.
pub const USERNAME_VAR: &str = "GADGET_OCI_USERNAME";
pub const PASSWORD_VAR: &str = "GADGET_OCI_PASSWORD";
/// The registry (`HOST[:PORT]`) the variables' credentials are for: they
/// are sent to it and to no other.
pub const REGISTRY_VAR: &str = "GADGET_OCI_REGISTRY";

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Registries (`HOST[:PORT]`) spoken to in plain HTTP although they are
    /// not on this machine (the operator asked, `--insecure-registry`).
    pub insecure: Vec<String>,
}

impl OciOptions {
    /// Whether `reference`'s registry is spoken to in plain HTTP.
    pub(super) fn plain_http(&self, reference: &OciRef) -> bool {
        reference.is_loopback() || self.insecure.iter().any(|r| r == reference.registry())
    }

    pub(super) fn client(&self, reference: &OciRef) -> Client {
        let registry = reference.registry().to_string();
        let plain = self.plain_http(reference);
        Client::new(ClientConfig {
            protocol: if plain {
                ClientProtocol::HttpsExcept(vec![registry])
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(REGISTRY_CONNECT_TIMEOUT),
            read_timeout: Some(REGISTRY_READ_TIMEOUT),
            // A component artifact is never a multi-platform index.
            platform_resolver: None,
            ..Default::default()
        })
    }
}

/// Credentials for `reference`'s registry: `GADGET_OCI_USERNAME` and
/// `GADGET_OCI_PASSWORD` when `GADGET_OCI_REGISTRY` names this registry,
/// else the Docker config (`$DOCKER_CONFIG` or `~/.docker/config.json`,
/// credential helpers included, each entry for its own registry), else
/// anonymous. Credentials are for one registry: the variables without the
/// registry they are for are an error, not a password sent everywhere.
pub(super) fn credentials(reference: &OciRef) -> Result<RegistryAuth, OciError> {
    let username = std::env::var(USERNAME_VAR).ok().filter(|v| !v.is_empty());
    let password = std::env::var(PASSWORD_VAR).ok();
    let scoped = std::env::var(REGISTRY_VAR).ok().filter(|v| !v.is_empty());
    let error = |reason: String| OciError::Credentials {
        reference: reference.to_string(),
        reason,
    };
    match (username, password, scoped) {
        (Some(_), None, _) => {
            return Err(error(format!(
                "{USERNAME_VAR} is set but {PASSWORD_VAR} is not"
            )));
        }
        (Some(_), Some(_), None) => {
            return Err(error(format!(
                "{USERNAME_VAR} and {PASSWORD_VAR} are set, but {REGISTRY_VAR} does not say which registry they are for; set {REGISTRY_VAR}={} to send them there (and nowhere else)",
                reference.registry()
            )));
        }
        (Some(user), Some(password), Some(registry))
            if registry.trim().trim_start_matches(SCHEME) == reference.registry() =>
        {
            return Ok(RegistryAuth::Basic(user, password));
        }
        _ => {}
    }
    match docker_credential::get_credential(reference.registry()) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(docker_credential::DockerCredential::IdentityToken(_)) => Err(OciError::Credentials {
            reference: reference.to_string(),
            reason: format!(
                "the Docker config holds an identity token, which gadget cannot use; set {USERNAME_VAR} and {PASSWORD_VAR}"
            ),
        }),
        Err(e) => {
            tracing::debug!(
                registry = reference.registry(),
                "no Docker credentials: {e:?}"
            );
            Ok(RegistryAuth::Anonymous)
        }
    }
}

/// The registry answered with a refusal, a failure or content that does
/// not match its digest; a refusal that wants credentials says where they
/// come from.
pub(super) fn registry_error(
    reference: &OciRef,
    error: &oci_client::errors::OciDistributionError,
) -> OciError {
    use oci_client::errors::OciDistributionError as E;
    // Content that is not what its digest names is a lie, not a failure.
    if let E::DigestError(oci_client::errors::DigestError::VerificationError { expected, actual }) =
        error
    {
        return OciError::DigestMismatch {
            reference: reference.to_string(),
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    let mut message = error_chain(error);
    let wants_credentials = matches!(
        error,
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. }
    ) || message.contains("code: 401")
        || message.contains("UNAUTHORIZED");
    if wants_credentials {
        message.push_str(&format!(
            "; it wants credentials: set {USERNAME_VAR} and {PASSWORD_VAR} (with {REGISTRY_VAR}={}), or log in with `docker login {}`",
            reference.registry(),
            reference.registry()
        ));
    }
    OciError::Registry {
        reference: reference.to_string(),
        message,
    }
}

pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}
