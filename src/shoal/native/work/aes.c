/* AES-256-CTR: OpenSSL EVP through dlopen, or software AES (FIPS-197). */
#include "aes.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ---- software AES-256, byte-oriented (no tables beyond the S-box) -------- */
static uint8_t sbox[256];
static int sbox_ready;

static uint8_t rotl8(uint8_t x, int s) { return (uint8_t)((x << s) | (x >> (8 - s))); }

/* The S-box from its definition: multiplicative inverse in GF(2^8), then the
 * affine map; p walks the field by x3, q by its inverse. */
static void make_sbox(void)
{
    uint8_t p = 1, q = 1;
    do {
        p = (uint8_t)(p ^ (p << 1) ^ (p & 0x80 ? 0x1b : 0));
        q ^= (uint8_t)(q << 1);
        q ^= (uint8_t)(q << 2);
        q ^= (uint8_t)(q << 4);
        if (q & 0x80)
            q ^= 0x09;
        sbox[p] = (uint8_t)(q ^ rotl8(q, 1) ^ rotl8(q, 2) ^ rotl8(q, 3) ^ rotl8(q, 4) ^ 0x63);
    } while (p != 1);
    sbox[0] = 0x63;
    sbox_ready = 1;
}

static uint8_t xtime(uint8_t x) { return (uint8_t)((x << 1) ^ (x & 0x80 ? 0x1b : 0)); }

static void expand_key(const uint8_t key[32], uint8_t rk[240])
{
    if (!sbox_ready)
        make_sbox();
    memcpy(rk, key, 32);
    uint8_t rcon = 1;
    for (int i = 8; i < 60; i++) {
        uint8_t t[4];
        memcpy(t, rk + 4 * (i - 1), 4);
        if (i % 8 == 0) {
            uint8_t first = t[0];
            t[0] = (uint8_t)(sbox[t[1]] ^ rcon);
            t[1] = sbox[t[2]];
            t[2] = sbox[t[3]];
            t[3] = sbox[first];
            rcon = xtime(rcon);
        } else if (i % 8 == 4) {
            for (int k = 0; k < 4; k++)
                t[k] = sbox[t[k]];
        }
        for (int k = 0; k < 4; k++)
            rk[4 * i + k] = rk[4 * (i - 8) + k] ^ t[k];
    }
}

static void encrypt_block(const uint8_t rk[240], const uint8_t in[16], uint8_t out[16])
{
    uint8_t s[16];
    for (int i = 0; i < 16; i++)
        s[i] = in[i] ^ rk[i];
    for (int round = 1; round <= 14; round++) {
        uint8_t t[16];
        /* SubBytes and ShiftRows (state is column-major: s[4c + r]). */
        for (int c = 0; c < 4; c++)
            for (int r = 0; r < 4; r++)
                t[4 * c + r] = sbox[s[4 * ((c + r) % 4) + r]];
        if (round < 14) /* MixColumns */
            for (int c = 0; c < 4; c++) {
                uint8_t *col = t + 4 * c, a0 = col[0], a1 = col[1], a2 = col[2], a3 = col[3];
                uint8_t all = a0 ^ a1 ^ a2 ^ a3;
                col[0] ^= all ^ xtime(a0 ^ a1);
                col[1] ^= all ^ xtime(a1 ^ a2);
                col[2] ^= all ^ xtime(a2 ^ a3);
                col[3] ^= all ^ xtime(a3 ^ a0);
            }
        for (int i = 0; i < 16; i++)
            s[i] = t[i] ^ rk[16 * round + i];
    }
    memcpy(out, s, 16);
}

void aes256_block(const uint8_t key[32], const uint8_t in[16], uint8_t out[16])
{
    uint8_t rk[240];
    expand_key(key, rk);
    encrypt_block(rk, in, out);
}

static void software_ctr(const uint8_t key[32], const uint8_t iv[16], const uint8_t *in, uint8_t *out,
                         size_t n)
{
    uint8_t rk[240], counter[16], stream[16];
    expand_key(key, rk);
    memcpy(counter, iv, 16);
    for (size_t off = 0; off < n; off += 16) {
        encrypt_block(rk, counter, stream);
        size_t take = n - off < 16 ? n - off : 16;
        for (size_t i = 0; i < take; i++)
            out[off + i] = in[off + i] ^ stream[i];
        for (int i = 15; i >= 0 && ++counter[i] == 0; i--)
            ; /* 128-bit big-endian increment, as OpenSSL's CTR */
    }
}

/* ---- OpenSSL EVP, loaded at run time ------------------------------------- */
struct aes_ctr {
    int openssl;
    void *lib;
    void *ctx;
    void *(*ctx_new)(void);
    void (*ctx_free)(void *);
    const void *(*cipher)(void);
    int (*init)(void *, const void *, void *, const uint8_t *, const uint8_t *);
    int (*update)(void *, uint8_t *, int *, const uint8_t *, int);
    char version[96];
};

static int load_openssl(aes_ctr *a)
{
    static const char *names[] = {"libcrypto.so.3", "libcrypto.so"};
    for (size_t i = 0; i < 2 && !a->lib; i++)
        a->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!a->lib)
        return -1;
    *(void **)&a->ctx_new = dlsym(a->lib, "EVP_CIPHER_CTX_new");
    *(void **)&a->ctx_free = dlsym(a->lib, "EVP_CIPHER_CTX_free");
    *(void **)&a->cipher = dlsym(a->lib, "EVP_aes_256_ctr");
    *(void **)&a->init = dlsym(a->lib, "EVP_EncryptInit_ex");
    *(void **)&a->update = dlsym(a->lib, "EVP_EncryptUpdate");
    const char *(*version)(int);
    *(void **)&version = dlsym(a->lib, "OpenSSL_version");
    if (!a->ctx_new || !a->ctx_free || !a->cipher || !a->init || !a->update) {
        dlclose(a->lib);
        a->lib = NULL;
        return -1;
    }
    if (version)
        strncpy(a->version, version(0), sizeof a->version - 1);
    a->ctx = a->ctx_new();
    return a->ctx ? 0 : -1;
}

aes_ctr *aes_ctr_open(const char *kind, const char **why)
{
    aes_ctr *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    if (strcmp(kind, "software") != 0 && load_openssl(a) == 0) {
        a->openssl = 1;
        return a;
    }
    if (strcmp(kind, "openssl") == 0) {
        *why = "--aes openssl: libcrypto (libcrypto.so.3, Debian package libssl3) could not be loaded";
        free(a);
        return NULL;
    }
    return a;
}

const char *aes_ctr_kind(const aes_ctr *a) { return a->openssl ? "openssl-evp" : "software"; }
const char *aes_ctr_library(const aes_ctr *a) { return a->openssl ? a->version : ""; }

int aes_ctr_crypt(aes_ctr *a, const uint8_t key[32], const uint8_t iv[16], const uint8_t *in,
                  uint8_t *out, size_t n)
{
    if (!a->openssl) {
        software_ctr(key, iv, in, out, n);
        return 0;
    }
    if (a->init(a->ctx, a->cipher(), NULL, key, iv) != 1)
        return -1;
    for (size_t off = 0; off < n;) {
        int chunk = n - off > (1u << 30) ? (1 << 30) : (int)(n - off), got = 0;
        if (a->update(a->ctx, out + off, &got, in + off, chunk) != 1)
            return -1;
        off += (size_t)chunk;
    }
    return 0;
}

void aes_ctr_close(aes_ctr *a)
{
    if (!a)
        return;
    if (a->openssl) {
        a->ctx_free(a->ctx);
        dlclose(a->lib);
    }
    free(a);
}
