#!/usr/bin/env bash
# Certificates for the local stack's TLS servers and for the TLS tests, made by the openssl
# command (nothing downloaded, nothing kept in git): a CA, then in DIR
#   ca.crt ca.key                    the stack's CA
#   server.crt server.key            a server certificate for 127.0.0.1 and localhost (also a client
#                                    one: cluster nodes present it to each other on the bus)
#   client.crt client.key            a client certificate (servers that require one)
#   expired.crt expired.key          a server certificate for 127.0.0.1 whose validity ended in 2021
#   wrongname.crt wrongname.key      a server certificate for elsewhere.invalid only
#   other-ca.crt                     a CA that signed none of the above
# Keys are P-256 EC keys (quick to make). Files that exist are kept: running it again is cheap.
#
#   scripts/tls-certs.sh DIR
set -euo pipefail
dir="${1:?usage: scripts/tls-certs.sh DIR}"
command -v openssl >/dev/null || { echo "tls-certs: openssl not found (Debian package openssl)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
[[ -s server.crt && -s client.crt && -s expired.crt && -s wrongname.crt && -s other-ca.crt ]] && exit 0

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }
ca() { # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "/CN=$2" -out "$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
leaf() { # name subject san extended-usage [startdate enddate]
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf 'basicConstraints=CA:FALSE\nsubjectAltName=%s\nextendedKeyUsage=%s\n' "$3" "$4" >"$1.ext"
  if [[ $# -ge 6 ]]; then
    # A validity in the past needs `openssl ca` (x509 -req has no start date in OpenSSL 3.0).
    mkdir -p ca-db && : >ca-db/index.txt && echo 01 >ca-db/serial
    cat >ca-db/ca.cnf <<EOF
[ca]
default_ca = local
[local]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
EOF
    openssl ca -batch -config ca-db/ca.cnf -cert ca.crt -keyfile ca.key -in "$1.csr" -out "$1.crt" \
      -startdate "$5" -enddate "$6" -extfile "$1.ext" -notext 2>/dev/null
  else
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 -sha256 \
      -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  fi
  rm -f "$1.csr" "$1.ext"
}

ca ca "delayd local stack CA"
leaf server "127.0.0.1" "IP:127.0.0.1,DNS:localhost" serverAuth,clientAuth
leaf client "delayd" "DNS:delayd" clientAuth
leaf expired "127.0.0.1" "IP:127.0.0.1,DNS:localhost" serverAuth 20200101000000Z 20210101000000Z
leaf wrongname "elsewhere.invalid" "DNS:elsewhere.invalid" serverAuth
( key other-ca.key && openssl req -x509 -new -key other-ca.key -sha256 -days 3650 -subj "/CN=another CA" \
    -out other-ca.crt -addext "basicConstraints=critical,CA:TRUE" && rm -f other-ca.key )
rm -rf ca-db ca.srl
echo "tls-certs: certificates in $dir"
