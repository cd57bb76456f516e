/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one resume loop of every LUKS2 re-encryption mode, in the shape of
 * cryptsetup's reencrypt_step() loop (lib/luks2/luks2_reencrypt.c): a
 * mode (ReencMode, crypto/reencryptpriv.h) says how its zones are read,
 * written and protected; the loop here starts it, repairs the zone a
 * crash cut short, runs the zones with progress, and finishes. The modes:
 * "encrypt" (block-luks2-reencrypt.c), "decrypt" (-decrypt.c) and
 * "reencrypt", a new volume key (-rekey.c); docs/reencrypt.md.
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

int reenc_mode_run(Reenc *r, const ReencMode *m, JsonObject *ks,
                   const QCryptoBlockSecret *secret, uint64_t hotzone,
                   Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    ReencRun run = { .r = r };
    uint64_t off, len;
    int ret = -1;

    if (m->start(&run, ks, secret, hotzone, errp) < 0) {
        goto out;
    }
    run.buf = reenc_zone_buf_new(run.bufsize);
    if (m->recover && m->recover(&run, errp) < 0) {
        goto out;
    }
    while (m->next(&run, &off, &len)) {
        if (io->progress && io->progress(io->opaque, m->done(&run),
                                         r->size)) {
            /* Stopped between zones: what was written is made durable. */
            ret = io->sync(io->opaque, errp) < 0 ? -1 : 1;
            goto out;
        }
        ret = m->zone(&run, off, len, errp);
        if (ret != 0) {
            goto out;
        }
        ret = -1;
    }
    if (io->stop_at == QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH &&
        m->stop_before_finish) {
        ret = m->stop_before_finish(&run, errp) < 0 ? -1 : 1;
        goto out;
    }
    if (m->finish(&run, errp) < 0) {
        goto out;
    }
    if (io->progress) {
        io->progress(io->opaque, r->size, r->size);
    }
    ret = 0;
out:
    reenc_zone_buf_free(run.buf, run.bufsize);
    if (run.state && m->clear) {
        m->clear(&run);
    }
    g_free(run.state);
    return ret;
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

int qcrypto_reencrypt_resume_keys(const QCryptoBlockSecret *secret,
                                  const QCryptoReencryptKeys *keys,
                                  uint64_t hotzone,
                                  const QCryptoReencryptIO *io, Error **errp)
{
    Reenc r = { .keys = keys };
    const ReencMode *m;
    JsonObject *ks;
    const char *mode;
    int ret = -1;

    /* LUKS1 keeps its run's state its own way (block-luks1-reencrypt.c) */
    if (reenc_luks1_image(io)) {
        return reenc_luks1_resume(secret, keys, hotzone, io, errp);
    }
    if (reenc_load(&r, io, errp) < 0) {
        goto out;
    }
    ret = reenc_trim_to_recorded_size(&r, errp);
    if (ret != 0) {
        ret = ret > 0 ? 0 : -1;
        goto out;
    }
    ret = -1;
    if (!(ks = reenc_find_keyslot(&r, &mode, errp))) {
        goto out;
    }
    m = reenc_mode_find(mode);
    if (!m) {
        error_setg(errp, "LUKS2 re-encryption mode '%s' is not supported "
                   "here yet: finish it with cryptsetup reencrypt "
                   "--resume-only", mode);
        goto out;
    }
    ret = reenc_mode_run(&r, m, ks, secret, hotzone, errp);
out:
    reenc_clear(&r);
    return ret;
}
