# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""Kernel module signatures made on the controller, so that the private key never reaches a node.

What the kernel's scripts/sign-file makes, with `cryptography` (a dependency of ansible-core) instead of a sign-file
the controller may lack: a PKCS#7 SignedData over the module's content - detached, no signed attributes, no
certificates, DER, the signer named by the certificate's issuer and serial - appended with the kernel's trailer
(gdrcopy_pipeline.append_signature, the one spelling of the format). RSA with PKCS#1 v1.5 is deterministic, so the
signature value equals sign-file's for the same key, hash and module (tests/unit/test_modsign.py compares them).

The key is a PEM file on the controller, or a key on a PKCS#11 token (RFC 7512 URI, through python-pkcs11): a token
key signs through the same PKCS#7 builder, which asks the key object for one PKCS#1 v1.5 signature. Before a
signature leaves the controller it is checked: it verifies against the certificate, and the module it covers is a
gdrdrv built for the kernel the node named (its .modinfo), so a node cannot have the controller sign anything else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import hashlib
import os
import re
import struct

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import (
    append_signature, split_signature, unsigned_content as unsigned)

MODULE_NAME = "gdrdrv"
# CONFIG_MODULE_SIG_HASH values the signer can make, and the DER of their digest algorithm OIDs.
HASH_OIDS = {
    "sha224": "608648016503040204", "sha256": "608648016503040201", "sha384": "608648016503040202",
    "sha512": "608648016503040203",
}
PKCS7_SIGNED_DATA = "2a864886f70d010702"


class SignError(Exception):
    """Signing refused or failed: the message says which module and why."""


def _crypto():
    """cryptography's modules, imported on first use (the node side of this collection never needs them)."""
    try:
        from cryptography import x509
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.serialization import pkcs7
    except ImportError as e:
        raise SignError("signing on the controller needs the Python package cryptography on the controller (%s)" % e)
    return {"x509": x509, "InvalidSignature": InvalidSignature, "hashes": hashes, "serialization": serialization,
            "ec": ec, "padding": padding, "rsa": rsa, "pkcs7": pkcs7}


def _hash(name):
    c = _crypto()
    algo = {"sha224": c["hashes"].SHA224, "sha256": c["hashes"].SHA256, "sha384": c["hashes"].SHA384,
            "sha512": c["hashes"].SHA512}.get(name)
    if algo is None:
        raise SignError("the kernel signs modules with %s (CONFIG_MODULE_SIG_HASH), which the controller's signer "
                        "does not make (it makes %s): sign on the host (mok_signing_sign_on_controller: false)"
                        % (name, ", ".join(sorted(HASH_OIDS))))
    return algo()


# --- the certificate and the key ---------------------------------------------------------------------------------

def load_certificate(data):
    """An X.509 certificate from DER or PEM bytes."""
    x509 = _crypto()["x509"]
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except ValueError as e:
        raise SignError("the certificate is neither PEM nor DER X.509: %s" % e)


def load_private_key(data, password=None):
    """A private key from PEM (or DER) bytes."""
    ser = _crypto()["serialization"]
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return ser.load_pem_private_key(data, password=password)
        return ser.load_der_private_key(data, password=password)
    except (TypeError, ValueError) as e:
        raise SignError("the private key cannot be read (%s)" % e)


def public_numbers_equal(a, b):
    ser = _crypto()["serialization"]
    fmt = (ser.Encoding.DER, ser.PublicFormat.SubjectPublicKeyInfo)
    return a.public_bytes(*fmt) == b.public_bytes(*fmt)


def check_pair(key, cert):
    """SignError unless the key is the certificate's (its public half is the certificate's public key)."""
    c = _crypto()
    if not isinstance(key, (c["rsa"].RSAPrivateKey, c["ec"].EllipticCurvePrivateKey)):
        raise SignError("the signing key is neither RSA nor ECDSA: the kernel verifies module signatures of those")
    if not public_numbers_equal(key.public_key(), cert.public_key()):
        raise SignError("the private key does not belong to the certificate (%s): give the pair that was enrolled"
                        % describe(cert))


def describe(cert):
    """'CN "..." serial 1A2B' for messages and reports."""
    x509 = _crypto()["x509"]
    cns = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    return 'CN "%s", serial %X' % (cns[0].value if cns else "", cert.serial_number)


# --- modules ------------------------------------------------------------------------------------------------------

def modinfo(content):
    """The .modinfo section of an ELF kernel module as {key: [values]}; SignError when it is no such module."""
    if content[:4] != b"\x7fELF" or len(content) < 64:
        raise SignError("it is not an ELF file")
    klass, order = content[4], content[5]
    if klass != 2 or order not in (1, 2):
        raise SignError("it is not a 64-bit ELF file")
    end = "<" if order == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", content, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", content, 0x3A)
    if not shoff or shentsize < 64 or shoff + shnum * shentsize > len(content) or shstrndx >= shnum:
        raise SignError("its ELF section table is malformed")

    def section(i):
        name, dummy, dummy, dummy, off, size = struct.unpack_from(end + "IIQQQQ", content, shoff + i * shentsize)
        if off + size > len(content):
            raise SignError("its ELF section %d lies outside the file" % i)
        return name, content[off:off + size]

    names = section(shstrndx)[1]
    for i in range(shnum):
        name_off, data = section(i)
        if names[name_off:names.find(b"\0", name_off)] == b".modinfo":
            info = {}
            for entry in data.split(b"\0"):
                key, sep, value = entry.decode("utf-8", "replace").partition("=")
                if sep:
                    info.setdefault(key, []).append(value)
            return info
    raise SignError("it has no .modinfo section (not a kernel module)")


def check_module(content, kernel):
    """SignError unless content (a module without signature) is a gdrdrv built for kernel: what the controller
    agrees to sign."""
    try:
        info = modinfo(content)
    except SignError as e:
        raise SignError("the module the host sent for %s is refused: %s" % (kernel, e))
    name = (info.get("name") or [""])[0]
    vermagic = ((info.get("vermagic") or [""])[0].split() or [""])[0]
    if name != MODULE_NAME or vermagic != kernel:
        raise SignError("the module the host sent for %s is refused: it is %r built for %r, not %s built for %s"
                        % (kernel, name, vermagic, MODULE_NAME, kernel))


# --- signing and checking -------------------------------------------------------------------------------------

def pkcs7_signature(content, key, cert, hash_name):
    """The PKCS#7 SignedData DER that sign-file appends: detached, no attributes, no certificates, binary."""
    c = _crypto()
    opts = c["pkcs7"].PKCS7Options
    builder = c["pkcs7"].PKCS7SignatureBuilder().set_data(content).add_signer(cert, key, _hash(hash_name))
    try:
        return builder.sign(c["serialization"].Encoding.DER,
                            [opts.DetachedSignature, opts.NoAttributes, opts.NoCerts, opts.Binary])
    except (TypeError, ValueError) as e:
        raise SignError("cryptography could not sign: %s" % e)


def _tlv(buf, i):
    """(tag, value, next index) of the DER element at buf[i]."""
    if i + 2 > len(buf):
        raise ValueError("truncated")
    tag, length, i = buf[i], buf[i + 1], i + 2
    if length & 0x80:
        n = length & 0x7F
        if not 0 < n <= 4 or i + n > len(buf):
            raise ValueError("bad length")
        length, i = int.from_bytes(buf[i:i + n], "big"), i + n
    if i + length > len(buf):
        raise ValueError("truncated")
    return tag, buf[i:i + length], i + length


def _children(buf):
    i, out = 0, []
    while i < len(buf):
        tag, value, i = _tlv(buf, i)
        out.append((tag, value))
    return out


def parse_pkcs7(der):
    """The one signer of a module signature: {digest: hash name, serial: int, issuer: DER, signature: bytes,
    signed_attrs: bool}; ValueError when it is not the kernel's form."""
    tag, outer, dummy = _tlv(der, 0)
    oid, explicit = _children(outer)[:2]
    if tag != 0x30 or oid != (0x06, bytes.fromhex(PKCS7_SIGNED_DATA)) or explicit[0] != 0xA0:
        raise ValueError("not a PKCS#7 SignedData")
    signed_data = _children(_children(explicit[1])[0][1])
    infos = [v for t, v in signed_data if t == 0x31][-1:]
    signers = _children(infos[0]) if infos else []
    if len(signers) != 1:
        raise ValueError("%d signers, not 1" % len(signers))
    fields = _children(signers[0][1])
    issuer_serial = _children(fields[1][1])
    digest_oid = _children(fields[2][1])[0][1].hex()
    names = dict((v, k) for k, v in HASH_OIDS.items())
    return {"digest": names.get(digest_oid, "oid " + digest_oid),
            "issuer": _tlv(fields[1][1], 0)[1], "serial": int.from_bytes(issuer_serial[1][1], "big"),
            "signed_attrs": any(t == 0xA0 for t, v in fields),
            "signature": next(v for t, v in reversed(fields) if t == 0x04)}


def verify(content, der, cert, hash_name=None):
    """SignError unless der is a kernel-style signature of content by cert's key (with hash_name when given)."""
    c = _crypto()
    try:
        sig = parse_pkcs7(der)
    except (ValueError, IndexError, StopIteration) as e:
        raise SignError("the signature is not a PKCS#7 SignedData the kernel reads: %s" % e)
    if sig["signed_attrs"]:
        raise SignError("the signature has signed attributes, which module signatures do not carry")
    if sig["serial"] != cert.serial_number:
        raise SignError("the signature names serial %X, not the certificate's %X"
                        % (sig["serial"], cert.serial_number))
    if hash_name and sig["digest"] != hash_name:
        raise SignError("the signature uses %s, not the kernel's %s" % (sig["digest"], hash_name))
    algo = _hash(sig["digest"])
    public = cert.public_key()
    try:
        if isinstance(public, c["rsa"].RSAPublicKey):
            public.verify(sig["signature"], content, c["padding"].PKCS1v15(), algo)
        else:
            public.verify(sig["signature"], content, c["ec"].ECDSA(algo))
    except c["InvalidSignature"]:
        raise SignError("the signature does not verify against %s" % describe(cert))


def sign_module(data, kernel, hash_name, key, cert):
    """The module bytes data (signed or not) signed for kernel with key and hash_name: any signature it carries is
    dropped first; the module is checked to be gdrdrv for kernel and the new signature against cert. The signed
    bytes."""
    try:
        content = unsigned(data)  # a module signed twice carries two; the kernel reads the last
    except ValueError as e:
        raise SignError("the module the host sent for %s is refused: %s" % (kernel, e))
    check_module(content, kernel)
    der = pkcs7_signature(content, key, cert, hash_name)
    verify(content, der, cert, hash_name)
    return append_signature(content, der)


# --- PKCS#11 ------------------------------------------------------------------------------------------------------

URI_RE = re.compile(r"^pkcs11:[^\s?]*(\?[^\s]*)?\Z")
PATH_ATTRS = ("token", "object", "id", "serial", "manufacturer", "model", "type")
QUERY_ATTRS = ("pin-value", "pin-source", "module-path", "module-name")


def parse_pkcs11_uri(uri):
    """An RFC 7512 URI as {attribute: value} (percent-decoded; path and query attributes together); ValueError
    names what is wrong."""
    try:
        from urllib.parse import unquote_to_bytes
    except ImportError:  # pragma: no cover - Python 2 controllers are not supported
        raise ValueError("Python 3 is needed")
    if not isinstance(uri, str) or not URI_RE.match(uri):
        raise ValueError("it does not start with pkcs11: or holds white space")
    path, dummy, query = uri[len("pkcs11:"):].partition("?")
    out = {}
    for part, allowed, sep in ((path, PATH_ATTRS, ";"), (query, QUERY_ATTRS, "&")):
        for item in filter(None, part.split(sep)):
            name, eq, value = item.partition("=")
            if not eq or name not in allowed:
                raise ValueError("%r is not one of the attributes %s" % (item, ", ".join(allowed)))
            if name in out:
                raise ValueError("%s is given twice" % name)
            raw = unquote_to_bytes(value)
            out[name] = raw if name == "id" else raw.decode("utf-8")
    if "object" not in out and "id" not in out:
        raise ValueError("it names no key (object= or id=)")
    if out.get("type", "private") != "private":
        raise ValueError("type is %s; the signing key is type=private" % out["type"])
    return out


def token_key(uri, module_path, pin, cert):
    """A private key object for the key the URI names on a PKCS#11 token, usable wherever cryptography takes an
    RSA private key (it signs through the token; nothing of the key leaves it). module_path: the token's PKCS#11
    library (the URI's module-path wins); pin: the user PIN (the URI's pin-value or pin-source win)."""
    try:
        attrs = parse_pkcs11_uri(uri)
    except ValueError as e:
        raise SignError("mok_signing_pkcs11_uri: %s" % e)
    try:
        import pkcs11
        from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass, TokenFlag
    except ImportError as e:
        raise SignError("signing through a PKCS#11 token needs the Python package python-pkcs11 on the controller "
                        "(pip install python-pkcs11): %s" % e)
    library = attrs.get("module-path") or module_path
    if not library:
        raise SignError("mok_signing_pkcs11_module: no PKCS#11 library is named (the URI has no module-path)")
    if "pin-source" in attrs:
        source = attrs["pin-source"][len("file:"):] if attrs["pin-source"].startswith("file:") \
            else attrs["pin-source"]
        try:
            with open(source) as f:
                pin = f.read().rstrip("\n")
        except (IOError, OSError) as e:
            raise SignError("mok_signing_pkcs11_uri: its pin-source %s cannot be read on the controller: %s"
                            % (source, e.strerror or e))
    pin = attrs.get("pin-value", pin)
    try:
        lib = pkcs11.lib(library)
        tokens = [t for t in lib.get_tokens(token_label=attrs.get("token"),
                                            token_serial=attrs["serial"].encode() if "serial" in attrs else None)
                  if t.flags & TokenFlag.TOKEN_INITIALIZED  # SoftHSM lists its free slot as a token too
                  and attrs.get("manufacturer", t.manufacturer_id) == t.manufacturer_id
                  and attrs.get("model", t.model) == t.model]
    except (pkcs11.PKCS11Error, OSError, RuntimeError) as e:
        raise SignError("the PKCS#11 library %s cannot be used: %s" % (library, e or type(e).__name__))
    if len(tokens) != 1:
        raise SignError("the PKCS#11 URI matches %d tokens in %s, not 1: name it with token= (or serial=)"
                        % (len(tokens), library))
    try:
        try:
            session = tokens[0].open(user_pin=pin or None)
        except pkcs11.UserAlreadyLoggedIn:  # a login is the application's, shared by all its sessions
            session = tokens[0].open()
        query = {Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.KEY_TYPE: KeyType.RSA}
        if "object" in attrs:
            query[Attribute.LABEL] = attrs["object"]
        if "id" in attrs:
            query[Attribute.ID] = attrs["id"]
        keys = list(session.get_objects(query))
    except pkcs11.PKCS11Error as e:
        raise SignError("the PKCS#11 token %s could not be opened (check mok_signing_pkcs11_pin): %s"
                        % (tokens[0].label, type(e).__name__))
    if len(keys) != 1:
        raise SignError("the PKCS#11 URI names %d RSA private keys on token %s, not 1" % (len(keys), tokens[0].label))
    return _token_rsa_key(keys[0], session, cert, Mechanism)


def _token_rsa_key(handle, session, cert, mechanisms):
    """An rsa.RSAPrivateKey whose sign() is the token's CKM_<hash>_RSA_PKCS (PKCS#1 v1.5 over the data)."""
    c = _crypto()
    mech = {"sha224": mechanisms.SHA224_RSA_PKCS, "sha256": mechanisms.SHA256_RSA_PKCS,
            "sha384": mechanisms.SHA384_RSA_PKCS, "sha512": mechanisms.SHA512_RSA_PKCS}

    class TokenKey(c["rsa"].RSAPrivateKey):
        session_ = session  # kept open while the key is in use

        def sign(self, data, pad, algorithm):
            if not isinstance(pad, c["padding"].PKCS1v15) or algorithm.name not in mech:
                raise SignError("the token key signs PKCS#1 v1.5 with SHA-2 only")
            return handle.sign(bytes(data), mechanism=mech[algorithm.name])

        def public_key(self):
            return cert.public_key()

        @property
        def key_size(self):
            return cert.public_key().key_size

        def decrypt(self, ciphertext, pad):
            raise SignError("the token key only signs")

        def private_numbers(self):
            raise SignError("a token key does not leave the token")

        def private_bytes(self, encoding, fmt, encryption):
            raise SignError("a token key does not leave the token")

        def __copy__(self):
            return self

        def __deepcopy__(self, memo):
            return self

    return TokenKey()


# --- the controller's signer ------------------------------------------------------------------------------------

class Signer(object):
    """One key and certificate on the controller, signing modules for hosts; with cache (the fleet builds'
    directory) each distinct module is signed once per certificate and hash, and its signature kept there (public
    data: a signature reveals nothing of the key), shared by every host and every later run."""

    def __init__(self, key, cert, cache=""):
        check_pair(key, cert)
        self.key, self.cert, self.cache = key, cert, cache
        ser = _crypto()["serialization"]
        self.cert_id = hashlib.sha256(cert.public_bytes(ser.Encoding.DER)).hexdigest()[:16]
        self.signatures = 0  # made by this signer (not taken from the cache)

    def sign(self, data, kernel, hash_name):
        """(signed module bytes, "signed" or "cached") for a module a host sent (see sign_module)."""
        if hash_name not in HASH_OIDS:  # the host said it; it names a file in the cache below
            raise SignError("the host asks for a signature with hash %r for %s: only %s are signed"
                            % (hash_name, kernel, ", ".join(sorted(HASH_OIDS))))
        try:
            content = unsigned(data)
        except ValueError as e:
            raise SignError("the module the host sent for %s is refused: %s" % (kernel, e))
        check_module(content, kernel)
        if not self.cache:
            self.signatures += 1
            return sign_module(content, kernel, hash_name, self.key, self.cert), "signed"
        directory = os.path.join(self.cache, "signatures")
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        name = "%s-%s-%s.p7s" % (hashlib.sha256(content).hexdigest(), self.cert_id, hash_name)
        path = os.path.join(directory, name)
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the other hosts' workers wait for the one that signs
            try:
                with open(path, "rb") as f:
                    der = f.read()
                verify(content, der, self.cert, hash_name)
                return append_signature(content, der), "cached"
            except (IOError, OSError, SignError):
                pass  # none yet, or not good: signed again
            signed = sign_module(content, kernel, hash_name, self.key, self.cert)
            self.signatures += 1
            with open(path + ".tmp", "wb") as f:
                f.write(split_signature(signed)[1])
            os.rename(path + ".tmp", path)
            return signed, "signed"


def open_signer(args, read, cache=""):
    """The Signer for the role's controller_signer arguments: {cert, key or pkcs11_uri, pkcs11_module, pkcs11_pin}.
    read(path) -> bytes reads a controller file (decrypting an ansible-vault file)."""
    if not args.get("cert") or bool(args.get("key")) == bool(args.get("pkcs11_uri")):
        raise SignError("controller_signer needs cert and one of key or pkcs11_uri")
    cert = load_certificate(read(args["cert"]))
    if args.get("key"):
        key = load_private_key(read(args["key"]))
    else:
        key = token_key(args["pkcs11_uri"], args.get("pkcs11_module") or "", args.get("pkcs11_pin") or "", cert)
    return Signer(key, cert, cache)
