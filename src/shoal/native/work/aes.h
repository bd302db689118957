/* AES-256-CTR for the edge workload: OpenSSL's EVP (loaded at run time from
 * libcrypto, so no development package is needed) or a plain software AES
 * of our own for devices whose CPU has no AES instructions. */
#ifndef SHOAL_WORK_AES_H
#define SHOAL_WORK_AES_H

#include <stddef.h>
#include <stdint.h>

typedef struct aes_ctr aes_ctr;

/* kind: "openssl", "software" or "auto" (OpenSSL if libcrypto loads). NULL
 * with *why set when the kind asked for is not available. */
aes_ctr *aes_ctr_open(const char *kind, const char **why);
/* Which implementation, and its library version ("" for software). */
const char *aes_ctr_kind(const aes_ctr *a);
const char *aes_ctr_library(const aes_ctr *a);
/* out = in XOR keystream(key, iv): CTR with a 128-bit big-endian counter block. */
int aes_ctr_crypt(aes_ctr *a, const uint8_t key[32], const uint8_t iv[16], const uint8_t *in,
                  uint8_t *out, size_t n);
void aes_ctr_close(aes_ctr *a);
/* One AES-256 block with the software AES (FIPS-197 C.3 self-test). */
void aes256_block(const uint8_t key[32], const uint8_t in[16], uint8_t out[16]);

#endif
