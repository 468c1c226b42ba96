/* vk_pipeline.c — the backend's shaders as pipelines: the embedded SPIR-V
 * (glslc -mfmt=c at build time: CMakeLists.txt), one push-descriptor set layout
 * and one pipeline layout for all of them, a pipeline per shader the
 * device can run, and per matvec shader one per token block. Which
 * pipeline a node takes is vk_record.c's choice; a variant the driver
 * refuses leaves its node on the portable shader. */
#include "compute/vulkan/vk_be.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

#define DECL(n) extern const uint32_t cmf__spv_##n[]; extern const size_t cmf__spv_##n##_size;
SHADERS(DECL)
#define ENTRY(n) {cmf__spv_##n, &cmf__spv_##n##_size, #n},
static const struct { const uint32_t *code; const size_t *size; const char *name; } SPV[P_COUNT] = {SHADERS(ENTRY)};

const vk_coop cmf__vk_coop[N_COOP] = {{P_matmul_coop, 64, 128}, {P_matmul_coop_t128, 128, 128}};
const uint32_t cmf__vk_mv_nt[N_MV_NT] = {1, 2, 4, 8};

static bool is_coop(int pipe)
{
    for (int i = 0; i < N_COOP; i++)
        if (cmf__vk_coop[i].pipe == pipe) return true;
    return false;
}

const char *cmf__vk_pipe_name(int pipe) { return pipe == P_COUNT ? "matvec" : SPV[pipe].name; }

int cmf__vk_mv_index(int dt, uint32_t *pipe, uint32_t *cols_mult)
{
    switch (dt) {
    case CMF_DTYPE_F16: *pipe = P_matvec_f16, *cols_mult = 8; return 0;
    case CMF_DTYPE_BF16: *pipe = P_matvec_bf16, *cols_mult = 8; return 1;
    case CMF_DTYPE_Q8_ROW: *pipe = P_matvec_q8, *cols_mult = 16; return 2;
    case CMF_DTYPE_Q8_2F: *pipe = P_matvec_q8_2f, *cols_mult = 16; return 3;
    case CMF_DTYPE_Q4_BLOCK: *pipe = P_matvec_q4, *cols_mult = 32; return 4;
    default: return -1;
    }
}

/* The matvec pipelines of shader i (dtype index mi), one per token block
 * (cmf__vk_mv_nt through specialization constant 0). A driver that refuses one
 * leaves that dtype on matmul.comp. */
static cmf_status make_mv(vk_be *be, int i, int mi)
{
    VkShaderModuleCreateInfo mci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, *SPV[i].size, SPV[i].code};
    VkShaderModule mod;
    VkResult r = vkCreateShaderModule(be->dev, &mci, NULL, &mod);
    if (r != VK_SUCCESS) return cmf__vk_fail(r, SPV[i].name);
    for (int n = 0; n < N_MV_NT && r == VK_SUCCESS; n++) {
        VkSpecializationMapEntry me = {0, 0, sizeof(uint32_t)};
        VkSpecializationInfo si = {1, &me, sizeof(uint32_t), &cmf__vk_mv_nt[n]};
        VkComputePipelineCreateInfo ci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
                                          {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                                           VK_SHADER_STAGE_COMPUTE_BIT, mod, "main", &si},
                                          be->layout, VK_NULL_HANDLE, 0};
        r = vkCreateComputePipelines(be->dev, VK_NULL_HANDLE, 1, &ci, NULL, &be->mv[mi][n]);
    }
    vkDestroyShaderModule(be->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        CMF_INFO("vulkan: the driver rejected the %s pipeline (VkResult %d); using matmul", SPV[i].name, (int)r);
        for (int n = 0; n < N_MV_NT; n++) {
            if (be->mv[mi][n]) vkDestroyPipeline(be->dev, be->mv[mi][n], NULL);
            be->mv[mi][n] = VK_NULL_HANDLE;
        }
    }
    return CMF_OK;
}

cmf_status cmf__vk_make_pipelines(vk_be *be)
{
    cmf_status st;
    const char *no_mv_env = getenv("CMF_VK_NO_MATVEC");
    const bool no_mv = no_mv_env && !strcmp(no_mv_env, "1"); /* the plain matmul.comp for decode (comparisons) */
    VkDescriptorSetLayoutBinding lb[N_BIND];
    for (int i = 0; i < N_BIND; i++)
        lb[i] = (VkDescriptorSetLayoutBinding){(uint32_t)i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                               VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo dl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL,
                                          VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR, N_BIND, lb};
    VkResult r = vkCreateDescriptorSetLayout(be->dev, &dl, NULL, &be->dsl);
    if (r != VK_SUCCESS) return cmf__vk_fail(r, "descriptor set layout");
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc)};
    VkPipelineLayoutCreateInfo pl = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &be->dsl, 1, &pcr};
    if ((r = vkCreatePipelineLayout(be->dev, &pl, NULL, &be->layout)) != VK_SUCCESS) return cmf__vk_fail(r, "pipeline layout");
    for (int i = 0; i < P_COUNT; i++) {
        if ((i == P_matmul_sg && !be->subgroups) || (is_coop(i) && (!be->coop || cmf__vk_coop[be->coop - 1].pipe != i)))
            continue; /* variants the device cannot run, and tensor-core GEMMs not chosen */
        uint32_t mp = 0, mult;
        int mi = -1;
        for (int dt = 0; dt < CMF_DTYPE_COUNT_ && mi < 0; dt++)
            if (cmf__vk_mv_index(dt, &mp, &mult) >= 0 && mp == (uint32_t)i) mi = cmf__vk_mv_index(dt, &mp, &mult);
        if (mi >= 0) { /* the matvec shaders: one pipeline per token block, with subgroups of 4 or more only */
            if (!be->matvec || no_mv) continue;
            if ((st = make_mv(be, i, mi))) return st;
            continue;
        }
        VkShaderModuleCreateInfo mi_ = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, *SPV[i].size, SPV[i].code};
        VkShaderModule mod;
        if ((r = vkCreateShaderModule(be->dev, &mi_, NULL, &mod)) != VK_SUCCESS) return cmf__vk_fail(r, SPV[i].name);
        VkComputePipelineCreateInfo ci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, NULL, 0,
                                          {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                                           VK_SHADER_STAGE_COMPUTE_BIT, mod, "main", NULL},
                                          be->layout, VK_NULL_HANDLE, 0};
        r = vkCreateComputePipelines(be->dev, VK_NULL_HANDLE, 1, &ci, NULL, &be->pipe[i]);
        vkDestroyShaderModule(be->dev, mod, NULL);
        if (r != VK_SUCCESS && (i == P_matmul_sg || is_coop(i))) { /* a variant refused: the plain one serves */
            CMF_INFO("vulkan: the driver rejected the %s pipeline (VkResult %d); using the portable one", SPV[i].name, (int)r);
            be->pipe[i] = VK_NULL_HANDLE;
            if (i == P_matmul_sg) be->subgroups = false;
            else be->coop = 0;
            continue;
        }
        if (r != VK_SUCCESS) {
            cmf_status st = cmf__vk_fail(r, "pipeline creation");
            return cmf__error(st, "vulkan: the driver rejected the %s pipeline (VkResult %d)", SPV[i].name, (int)r);
        }
    }
    return CMF_OK;
}
