/* fixture_model.h — an hf-models fixture family converted at f32 by the
 * built `cmf convert` ($CMF_BIN) into the test's temporary folder and
 * opened as a bound model, for the engine tests. NULL (the caller skips)
 * when CMF_BIN or the fixture is absent; a failing convert or open fails
 * the test. Header-only: the util tests share harness.c and must not
 * link the model module. */
#ifndef CMF_TESTS_FIXTURE_MODEL_H
#define CMF_TESTS_FIXTURE_MODEL_H

#include "harness.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline cmf__model *fixture_model_f32(const char *family)
{
    const char *bin = getenv("CMF_BIN");
    char dir[512], cfg[600], cmd[2048], out[1024];
    if (!bin || !harness_fixtures()) return NULL;
    snprintf(dir, sizeof dir, "%s", harness_fixture_path("hf-models"));
    snprintf(cfg, sizeof cfg, "%s/%s/config.json", dir, family);
    if (access(cfg, R_OK) != 0) return NULL;
    snprintf(out, sizeof out, "%s/%s-f32.cmf", harness_tmpdir(), family);
    snprintf(cmd, sizeof cmd, "'%s' convert --quiet --quant f32 --model '%s/%s' --output '%s'", bin, dir, family, out);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) return NULL;
    cmf__model *m = NULL;
    CHECK_OK(cmf__model_open(out, &m));
    return m;
}

#endif
