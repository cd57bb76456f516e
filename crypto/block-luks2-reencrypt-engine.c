/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one resume loop of every LUKS2 re-encryption mode, in the shape of
 * cryptsetup's reencrypt_step() loop (lib/luks2/luks2_reencrypt.c): a
 * mode (ReencMode, crypto/reencryptpriv.h) says how its zones are read,
 * written and protected; the loop here starts it, repairs the zone a
 * crash cut short, runs the zones with progress, and finishes. The modes:
 * "encrypt" (block-luks2-reencrypt.c), "decrypt" (-decrypt.c) and
 * "reencrypt", a new volume key (-rekey.c), and a LUKS1 image's new
 * volume key (block-luks1-reencrypt.c); docs/reencrypt.md. The same run,
 * taken one zone at a time (qcrypto_reencrypt_run_*), is what online
 * re-encryption drives (block/crypto-online.c).
 */
#include "crypto/reencryptpriv.h"

/* Every mode there is, by the reencrypt key slot's name for it. */
static const ReencMode *const reenc_modes[] = {
    &reenc_mode_encrypt,
    &reenc_mode_decrypt,
    &reenc_mode_rekey,
};

static const ReencMode *reenc_mode_find(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(reenc_modes); i++) {
        if (g_str_equal(reenc_modes[i]->name, name)) {
            return reenc_modes[i];
        }
    }
    return NULL;
}

struct QCryptoReencryptRun {
    Reenc r;
    const ReencMode *m;
    ReencRun run;
    bool started;               /* m->start ran: run.state is the mode's */
};

void qcrypto_reencrypt_run_free(QCryptoReencryptRun *x)
{
    if (!x) {
        return;
    }
    reenc_zone_buf_free(x->run.buf, x->run.bufsize);
    if (x->started && x->run.state && x->m->clear) {
        x->m->clear(&x->run);
    }
    g_free(x->run.state);
    reenc_clear(&x->r);
    g_free(x);
}

/* Start mode x->m (state in x->r, key slot ks), repair a cut zone. */
static int reenc_run_begin(QCryptoReencryptRun *x, JsonObject *ks,
                           const QCryptoBlockSecret *secret, uint64_t hotzone,
                           Error **errp)
{
    x->run.r = &x->r;
    x->started = true;
    if (x->m->start(&x->run, ks, secret, hotzone, errp) < 0) {
        return -1;
    }
    x->run.buf = reenc_zone_buf_new(x->run.bufsize);
    return x->m->recover ? x->m->recover(&x->run, errp) : 0;
}

bool qcrypto_reencrypt_run_next(QCryptoReencryptRun *x, uint64_t *off,
                                uint64_t *len)
{
    return x->m->next(&x->run, off, len);
}

/* 0, or 1 from the tests' stops inside a zone (resumable), -1 */
int qcrypto_reencrypt_run_zone(QCryptoReencryptRun *x, uint64_t off,
                               uint64_t len, Error **errp)
{
    return x->m->zone(&x->run, off, len, errp);
}

uint64_t qcrypto_reencrypt_run_done(QCryptoReencryptRun *x)
{
    return x->m->done(&x->run);
}

uint64_t qcrypto_reencrypt_run_size(QCryptoReencryptRun *x)
{
    return x->r.size;
}

int qcrypto_reencrypt_run_finish(QCryptoReencryptRun *x, Error **errp)
{
    const QCryptoReencryptIO *io = x->r.io;

    if (x->m->finish(&x->run, errp) < 0) {
        return -1;
    }
    if (io->progress) {
        io->progress(io->opaque, x->r.size, x->r.size);
    }
    return 0;
}

bool qcrypto_reencrypt_run_online(QCryptoReencryptRun *x)
{
    return x->m->crypt != NULL;
}

uint64_t qcrypto_reencrypt_run_data_offset(QCryptoReencryptRun *x)
{
    return x->m->data_offset(&x->run);
}

uint32_t qcrypto_reencrypt_run_sector_size(QCryptoReencryptRun *x)
{
    return x->m->sector_size(&x->run);
}

int qcrypto_reencrypt_run_crypt(QCryptoReencryptRun *x, uint64_t done,
                                bool encrypt, uint64_t off, uint8_t *buf,
                                size_t len, Error **errp)
{
    return x->m->crypt(&x->run, done, encrypt, off, buf, len, errp);
}

/* The zones, with progress, to the end: 0 done, 1 stopped, -1 error. */
static int reenc_mode_resume(QCryptoReencryptRun *x, Error **errp)
{
    const QCryptoReencryptIO *io = x->r.io;
    uint64_t off, len;

    while (qcrypto_reencrypt_run_next(x, &off, &len)) {
        if (io->progress && io->progress(io->opaque,
                                         qcrypto_reencrypt_run_done(x),
                                         x->r.size)) {
            /* Stopped between zones: what was written is made durable. */
            return io->sync(io->opaque, errp) < 0 ? -1 : 1;
        }
        int ret = qcrypto_reencrypt_run_zone(x, off, len, errp);

        if (ret != 0) {
            return ret;         /* 1: a test stop, resumable */
        }
    }
    if (io->stop_at == QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH &&
        x->m->stop_before_finish) {
        return x->m->stop_before_finish(&x->run, errp) < 0 ? -1 : 1;
    }
    return qcrypto_reencrypt_run_finish(x, errp);
}

/*
 * An encryption of ours that cryptsetup finished: no re-encryption left,
 * one "dynamic" segment over a file that is still V + 2S long (cryptsetup
 * neither cuts a file nor writes a fixed size), and our data-size token
 * saying V. The file is cut to S + V and synced, then the token dropped:
 * a crash in between leaves a file of the right size that the token still
 * describes right. 1 done, 0 nothing of the kind here, -1 error.
 */
static int reenc_trim_to_recorded_size(Reenc *r, Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(JsonNode) root = NULL;
    const QCryptoLUKS2Segment *seg;
    uint64_t size;
    int64_t len;

    JsonNode *cn = json_object_get_member(json_node_get_object(r->root),
                                          "config");
    JsonObject *config = cn && JSON_NODE_HOLDS_OBJECT(cn) ?
        json_node_get_object(cn) : NULL;

    /* In re-encryption (or not LUKS2 we know): the resume's to judge. */
    if (!config || json_object_has_member(config, "requirements")) {
        return 0;
    }
    md = qcrypto_luks2_metadata_parse(r->hdr->json, r->hdr->bin.hdr_size,
                                      errp);
    if (!md) {
        return -1;
    }
    seg = qcrypto_luks2_data_segment(md, NULL);
    if (!seg || !seg->size_dynamic || !seg->offset ||
        !(size = qcrypto_luks2_data_size(md, seg))) {
        return 0;
    }
    len = io->length(io->opaque, errp);
    if (len < 0) {
        return -1;
    }
    if ((uint64_t)len > seg->offset + size &&
        io->truncate &&
        (io->truncate(io->opaque, seg->offset + size, errp) < 0 ||
         io->sync(io->opaque, errp) < 0)) {
        return -1;
    }
    /* A block device keeps its length: the token goes on saying V. */
    len = io->length(io->opaque, errp);
    if (len < 0) {
        return -1;
    }
    if ((uint64_t)len > seg->offset + size) {
        return 1;
    }
    root = reenc_deep_copy(r->root);
    reenc_drop_size_token(root);
    return reenc_write_root(r, root, errp) < 0 ? -1 : 1;
}

int qcrypto_reencrypt_resume(const QCryptoBlockSecret *secret,
                             uint64_t hotzone, const QCryptoReencryptIO *io,
                             Error **errp)
{
    return qcrypto_reencrypt_resume_keys(secret, NULL, hotzone, io, errp);
}

/*
 * Find the run the image behind io is in: 1 (x->m set; *ks its LUKS2 key
 * slot, NULL for LUKS1), 0 nothing left to do (what a finished run left
 * was tidied), -1 and errp.
 */
static int reenc_run_find(QCryptoReencryptRun *x,
                          const QCryptoReencryptKeys *keys,
                          const QCryptoReencryptIO *io, JsonObject **ks,
                          Error **errp)
{
    const char *mode;
    int ret;

    x->r.keys = keys;
    x->r.io = io;
    *ks = NULL;
    /* LUKS1 keeps its run's state its own way (block-luks1-reencrypt.c) */
    if (reenc_luks1_image(io)) {
        ret = reenc_luks1_find(io, errp);
        x->m = ret > 0 ? &reenc_mode_luks1 : NULL;
        return ret;
    }
    if (reenc_load(&x->r, io, errp) < 0) {
        return -1;
    }
    ret = reenc_trim_to_recorded_size(&x->r, errp);
    if (ret != 0) {
        return ret > 0 ? 0 : -1;
    }
    if (!(*ks = reenc_find_keyslot(&x->r, &mode, errp))) {
        return -1;
    }
    x->m = reenc_mode_find(mode);
    if (!x->m) {
        error_setg(errp, "LUKS2 re-encryption mode '%s' is not supported "
                   "here yet: finish it with cryptsetup reencrypt "
                   "--resume-only", mode);
        return -1;
    }
    return 1;
}

QCryptoReencryptRun *qcrypto_reencrypt_run_open(
    const QCryptoBlockSecret *secret, const QCryptoReencryptKeys *keys,
    uint64_t hotzone, const QCryptoReencryptIO *io, Error **errp)
{
    g_autoptr(QCryptoReencryptRun) x = g_new0(QCryptoReencryptRun, 1);
    JsonObject *ks;
    int ret = reenc_run_find(x, keys, io, &ks, errp);

    if (ret == 0) {
        error_setg(errp, "The image is not being re-encrypted");
    }
    if (ret <= 0 || reenc_run_begin(x, ks, secret, hotzone, errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&x);
}

int qcrypto_reencrypt_resume_keys(const QCryptoBlockSecret *secret,
                                  const QCryptoReencryptKeys *keys,
                                  uint64_t hotzone,
                                  const QCryptoReencryptIO *io, Error **errp)
{
    g_autoptr(QCryptoReencryptRun) x = g_new0(QCryptoReencryptRun, 1);
    JsonObject *ks;
    int ret = reenc_run_find(x, keys, io, &ks, errp);

    if (ret <= 0) {
        return ret;
    }
    if (reenc_run_begin(x, ks, secret, hotzone, errp) < 0) {
        return -1;
    }
    return reenc_mode_resume(x, errp);
}
