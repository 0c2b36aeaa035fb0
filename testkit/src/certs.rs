//! The test CA and its certificates (`rcgen`), made at test time for the TLS servers.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA named `name`: its parameters and key (to sign with) and its certificate in PEM.
pub(crate) fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().expect("a key for the test CA");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key).expect("the test CA").pem();
    (params, key, pem)
}

/// A certificate of `names` (subject alternative names; the first is the common name too) for
/// `usage`, signed by `issuer`: its PEM and its key's PEM.
pub(crate) fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let mut params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .expect("certificate params");
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("client"),
    );
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).expect("a certificate");
    (cert.pem(), key.serialize_pem())
}

/// Writes `text` to `dir/name`.
pub(crate) fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("writes a test certificate file");
}
