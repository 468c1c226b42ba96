/* skills.c — the skills registry as data (skills.h): ids, record lookup,
 * the f16 base64 vectors of a selection block, recon-argmin scores, and a
 * selection block built from feature rows by a small PCA (power iteration
 * on the Gram matrix). Everything read from a file is checked before use. */
#include "format/skills.h"
#include "util/error.h"
#include "util/half.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool cmf__skill_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > CMF_SKILL_ID_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '_' && id[i] != '-') return false;
    return true;
}

json_t *cmf__skills_find(const json_t *header, const char *id, size_t *index)
{
    const json_t *skills = json_object_get(header, "skills");
    size_t i;
    json_t *rec;
    if (!json_is_array(skills)) return NULL;
    json_array_foreach(skills, i, rec) {
        const char *rid = json_string_value(json_object_get(rec, "id"));
        if (rid && !strcmp(rid, id)) {
            if (index) *index = i;
            return rec;
        }
    }
    return NULL;
}

long cmf__skill_layer_of(const char *name)
{
    const char *p = strstr(name, ".layers.");
    if (!p) return -1;
    p += 8;
    if (!isdigit((unsigned char)*p)) return -1;
    char *end;
    long l = strtol(p, &end, 10);
    return (*end == '.' || *end == 0) && l >= 0 && l < 1000000 ? l : -1;
}

/* ---- f16 base64 ---------------------------------------------------------- */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *cmf__f16_base64_encode(const float *v, size_t n)
{
    size_t nb = 2 * n, cap = (nb + 2) / 3 * 4 + 1;
    uint8_t *raw = malloc(nb ? nb : 1);
    char *out = malloc(cap);
    if (!raw || !out) {
        free(raw);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = cmf__f32_to_f16(v[i]);
        raw[2 * i] = (uint8_t)h;
        raw[2 * i + 1] = (uint8_t)(h >> 8);
    }
    size_t o = 0;
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t w = (uint32_t)raw[i] << 16;
        if (i + 1 < nb) w |= (uint32_t)raw[i + 1] << 8;
        if (i + 2 < nb) w |= raw[i + 2];
        out[o++] = B64[w >> 18 & 63];
        out[o++] = B64[w >> 12 & 63];
        out[o++] = i + 1 < nb ? B64[w >> 6 & 63] : '=';
        out[o++] = i + 2 < nb ? B64[w & 63] : '=';
    }
    out[o] = 0;
    free(raw);
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

cmf_status cmf__f16_base64_decode(const char *s, float *out, size_t n, size_t *n_found, const char *what)
{
    size_t len = s ? strlen(s) : 0, pad = 0;
    if (n_found) *n_found = 0;
    if (len % 4) return cmf__error(CMF_ERR_PARSE, "%s: base64 length %zu is not a multiple of 4", what, len);
    if (len && s[len - 1] == '=') pad++;
    if (len > 1 && s[len - 2] == '=') pad++;
    size_t nb = len / 4 * 3 - pad;
    for (size_t i = 0; i < len - pad; i++)
        if (b64_value(s[i]) < 0)
            return cmf__error(CMF_ERR_PARSE, "%s: character %zu ('%c') is not base64", what, i, s[i]);
    if (nb % 2) return cmf__error(CMF_ERR_PARSE, "%s: %zu bytes is not a whole number of f16 values", what, nb);
    if (n_found) *n_found = nb / 2;
    if (!out) return CMF_OK;
    if (nb / 2 != n) return cmf__error(CMF_ERR_SIZE, "%s: %zu f16 values, expected %zu", what, nb / 2, n);
    uint8_t prev = 0;
    for (size_t i = 0; i < nb; i++) {
        /* byte i comes from characters 4*(i/3) .. */
        size_t q = i / 3 * 4;
        uint32_t w = (uint32_t)b64_value(s[q]) << 18 | (uint32_t)b64_value(s[q + 1]) << 12;
        if (s[q + 2] != '=') w |= (uint32_t)b64_value(s[q + 2]) << 6;
        if (s[q + 3] != '=') w |= (uint32_t)b64_value(s[q + 3]);
        uint8_t b = (uint8_t)(w >> (16 - 8 * (i % 3)));
        if (i % 2) {
            float f = cmf__f16_to_f32((uint16_t)(prev | (uint16_t)b << 8));
            if (!isfinite(f)) return cmf__error(CMF_ERR_PARSE, "%s: value %zu is not finite", what, i / 2);
            out[i / 2] = f;
        }
        prev = b;
    }
    return CMF_OK;
}

/* ---- selection ----------------------------------------------------------- */
void cmf__skill_selection_free(cmf__skill_selection *s)
{
    if (!s) return;
    free(s->mean);
    free(s->basis);
    memset(s, 0, sizeof *s);
}

cmf_status cmf__skill_selection_parse(const json_t *sel, uint32_t dim, int n_layers, const char *what,
                                      cmf__skill_selection *out)
{
    memset(out, 0, sizeof *out);
    if (dim == 0 || n_layers < 0) /* the caller's arch numbers: a checked parse never gives these */
        return cmf__error(CMF_ERR_ARG, "%s: selection: model width %u / %d layers out of range", what, dim, n_layers);
    if (!json_is_object(sel)) return cmf__error(CMF_ERR_PARSE, "%s: selection: expected an object", what);
    const char *metric = json_string_value(json_object_get(sel, "metric"));
    if (!metric || strcmp(metric, "mse"))
        return cmf__error(CMF_ERR_PARSE, "%s: selection.metric: expected \"mse\"", what);
    const json_t *pl = json_object_get(sel, "phi_layer");
    if (!json_is_integer(pl) || json_integer_value(pl) < 0 || json_integer_value(pl) > n_layers)
        return cmf__error(CMF_ERR_PARSE, "%s: selection.phi_layer: expected an integer in 0..%d", what, n_layers);
    const char *mean = json_string_value(json_object_get(sel, "mean"));
    const char *basis = json_string_value(json_object_get(sel, "basis"));
    if (!mean || !basis) return cmf__error(CMF_ERR_PARSE, "%s: selection.mean and .basis: expected strings", what);
    char w[300];
    size_t nb = 0;
    snprintf(w, sizeof w, "%s: selection.basis", what);
    cmf_status st = cmf__f16_base64_decode(basis, NULL, 0, &nb, w);
    if (st) return st;
    if (nb == 0 || nb % dim || nb / dim > dim)
        return cmf__error(CMF_ERR_SIZE, "%s: %zu values, expected d x k with d = %u and 1 <= k <= d", w, nb, dim);
    out->phi_layer = (int)json_integer_value(pl);
    out->dim = dim;
    out->rank = (uint32_t)(nb / dim);
    out->mean = malloc(dim * sizeof *out->mean);
    float *dk = malloc(nb * sizeof *dk);
    out->basis = malloc(nb * sizeof *out->basis);
    if (!out->mean || !dk || !out->basis) {
        free(dk);
        cmf__skill_selection_free(out);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    }
    if (!(st = cmf__f16_base64_decode(basis, dk, nb, NULL, w))) {
        snprintf(w, sizeof w, "%s: selection.mean", what);
        st = cmf__f16_base64_decode(mean, out->mean, dim, NULL, w);
    }
    for (uint32_t i = 0; !st && i < dim; i++)
        for (uint32_t j = 0; j < out->rank; j++) out->basis[(size_t)j * dim + i] = dk[(size_t)i * out->rank + j];
    free(dk);
    if (st) cmf__skill_selection_free(out);
    return st;
}

double cmf__skill_selection_error(const cmf__skill_selection *s, const float *phi)
{
    /* r − BBᵀr computed as written (not as ‖r‖² − ‖Bᵀr‖²): the stored f16
     * basis is only nearly orthonormal. */
    double pp = 0, e = 0;
    double *c = calloc(s->rank ? s->rank : 1, sizeof *c);
    if (!c) return INFINITY;
    for (uint32_t j = 0; j < s->rank; j++) {
        const float *b = s->basis + (size_t)j * s->dim;
        for (uint32_t i = 0; i < s->dim; i++) c[j] += ((double)phi[i] - s->mean[i]) * b[i];
    }
    for (uint32_t i = 0; i < s->dim; i++) {
        double r = (double)phi[i] - s->mean[i];
        for (uint32_t j = 0; j < s->rank; j++) r -= c[j] * s->basis[(size_t)j * s->dim + i];
        e += r * r;
        pp += (double)phi[i] * phi[i];
    }
    free(c);
    return pp > 0 ? e / pp : INFINITY;
}

cmf_status cmf__skill_blend_weights(const double *E, size_t n, double T, double *w)
{
    if (!(T > 0) || !isfinite(T)) return cmf__error(CMF_ERR_ARG, "blend temperature %g: expected a number > 0", T);
    double lo = INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(E[i]) && E[i] < lo) lo = E[i];
    for (size_t i = 0; i < n; i++) {
        /* shifted by the smallest E: exp never overflows, the best gets 1 */
        w[i] = isfinite(E[i]) ? exp(-(E[i] - lo) / T) : 0;
        sum += w[i];
    }
    for (size_t i = 0; i < n && sum > 0; i++) w[i] /= sum;
    return CMF_OK;
}

cmf_status cmf__skill_selection_build(const float *phi, uint32_t n, uint32_t dim, uint32_t rank, int phi_layer,
                                      json_t **out)
{
    *out = NULL;
    if (n < 2 || dim == 0) return cmf__error(CMF_ERR_ARG, "a selection needs at least 2 feature rows (got %u)", n);
    if (rank > n - 1) rank = n - 1;
    if (rank > dim) rank = dim;
    double *x = malloc((size_t)n * dim * sizeof *x), *g = malloc((size_t)n * n * sizeof *g);
    double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
    float *mean = calloc(dim, sizeof *mean), *basis = calloc((size_t)dim * (rank ? rank : 1), sizeof *basis);
    double *dir = malloc((size_t)rank * dim * sizeof *dir + 1);
    char *m64 = NULL, *b64 = NULL;
    cmf_status st = CMF_OK;
    if (!x || !g || !u || !v || !mean || !basis || !dir) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory building a selection block");
        goto done;
    }
    for (uint32_t i = 0; i < dim; i++) {
        double s = 0;
        for (uint32_t r = 0; r < n; r++) s += phi[(size_t)r * dim + i];
        mean[i] = (float)(s / n);
    }
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t i = 0; i < dim; i++) x[(size_t)r * dim + i] = (double)phi[(size_t)r * dim + i] - mean[i];
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = 0; b <= a; b++) {
            double s = 0;
            for (uint32_t i = 0; i < dim; i++) s += x[(size_t)a * dim + i] * x[(size_t)b * dim + i];
            g[(size_t)a * n + b] = g[(size_t)b * n + a] = s;
        }
    double trace = 0;
    for (uint32_t a = 0; a < n; a++) trace += g[(size_t)a * n + a];
    uint32_t kept = 0;
    for (uint32_t j = 0; j < rank; j++) {
        /* power iteration on the deflated Gram matrix; a fixed, data-free
         * start keeps the result deterministic */
        for (uint32_t a = 0; a < n; a++) u[a] = 1.0 + 0.01 * a;
        double lambda = 0;
        for (int it = 0; it < 300; it++) {
            double norm = 0;
            for (uint32_t a = 0; a < n; a++) {
                double s = 0;
                for (uint32_t b = 0; b < n; b++) s += g[(size_t)a * n + b] * u[b];
                v[a] = s;
                norm += s * s;
            }
            norm = sqrt(norm);
            if (norm <= 1e-12 * (trace > 0 ? trace : 1)) {
                lambda = 0;
                break;
            }
            double diff = 0;
            for (uint32_t a = 0; a < n; a++) v[a] /= norm, diff += fabs(v[a] - u[a]);
            memcpy(u, v, n * sizeof *u);
            lambda = norm;
            if (diff < 1e-10) break;
        }
        if (lambda <= 1e-9 * (trace > 0 ? trace : 1)) break;
        /* direction = Xᵀu, orthogonalised against the kept ones, unit norm */
        double *d = dir + (size_t)kept * dim;
        for (uint32_t i = 0; i < dim; i++) {
            double s = 0;
            for (uint32_t a = 0; a < n; a++) s += x[(size_t)a * dim + i] * u[a];
            d[i] = s;
        }
        for (uint32_t p = 0; p < kept; p++) {
            const double *q = dir + (size_t)p * dim;
            double dot = 0;
            for (uint32_t i = 0; i < dim; i++) dot += d[i] * q[i];
            for (uint32_t i = 0; i < dim; i++) d[i] -= dot * q[i];
        }
        double dn = 0;
        for (uint32_t i = 0; i < dim; i++) dn += d[i] * d[i];
        dn = sqrt(dn);
        if (dn <= 0) break;
        for (uint32_t i = 0; i < dim; i++) d[i] /= dn;
        kept++;
        /* deflate: G -= lambda u uᵀ */
        for (uint32_t a = 0; a < n; a++)
            for (uint32_t b = 0; b < n; b++) g[(size_t)a * n + b] -= lambda * u[a] * u[b];
    }
    if (kept == 0) {
        st = cmf__error(CMF_ERR_ARG, "the %u feature rows are all equal: no direction to keep", n);
        goto done;
    }
    for (uint32_t i = 0; i < dim; i++)
        for (uint32_t j = 0; j < kept; j++) basis[(size_t)i * kept + j] = (float)dir[(size_t)j * dim + i];
    m64 = cmf__f16_base64_encode(mean, dim);
    b64 = cmf__f16_base64_encode(basis, (size_t)dim * kept);
    json_t *o = json_object();
    if (!m64 || !b64 || !o) {
        json_decref(o);
        st = cmf__error(CMF_ERR_NOMEM, "out of memory building a selection block");
        goto done;
    }
    json_object_set_new(o, "metric", json_string("mse"));
    json_object_set_new(o, "phi_layer", json_integer(phi_layer));
    json_object_set_new(o, "rank", json_integer(kept));
    json_object_set_new(o, "mean", json_string(m64));
    json_object_set_new(o, "basis", json_string(b64));
    *out = o;
done:
    free(x);
    free(g);
    free(u);
    free(v);
    free(mean);
    free(basis);
    free(dir);
    free(m64);
    free(b64);
    return st;
}
