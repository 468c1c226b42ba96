/* commands.h — the subcommand table: name, entry point, one-line summary.
 * Each entry's function lives in cmd_<name>.c. */
#ifndef CMF_COMMANDS_H
#define CMF_COMMANDS_H

#define CMF_COMMAND_LIST(X)                                                              \
    X(info,        cmd_info,        "summarise a .cmf file (arch, quant mix, sections)")  \
    X(verify,      cmd_verify,      "check the whole hash chain and any detached .sig")    \
    X(sign,        cmd_sign,        "write FILE.sig (Ed25519 over the file's SHA-256)")    \
    X(keygen,      cmd_keygen,      "make an Ed25519 signing key")                          \
    X(convert,     cmd_convert,     "convert a Hugging Face checkpoint to .cmf")            \
    X(import-gguf, cmd_import_gguf, "convert a GGUF file to .cmf")                          \
    X(requant,     cmd_requant,     "change the quantization of a .cmf file")               \
    X(compact,     cmd_compact,     "rewrite a .cmf file tightly")                          \
    X(tokenize,    cmd_tokenize,    "encode text with a model's tokenizer")                 \
    X(detokenize,  cmd_detokenize,  "decode token ids to text")                             \
    X(template,    cmd_template,    "render a conversation through the chat template")      \
    X(run,         cmd_run,         "generate text (one shot or interactive)")              \
    X(chat,        cmd_chat,        "interactive chat through the file's template")         \
    X(logits,      cmd_logits,      "write f32 logits of every position")                   \
    X(bench,       cmd_bench,       "measure prompt and generation speed")                  \
    X(ppl,         cmd_ppl,         "teacher-forced perplexity of a text")                  \
    X(lora,        cmd_lora,        "merge LoRA adapters into a .cmf (lora merge)")         \
    X(skill,       cmd_skill,       "make, list, route, move skills (specialist overlays)") \
    X(serve,       cmd_serve,       "OpenAI-compatible HTTP server (chat, completions, streaming)")

#define X(name, fn, help) int fn(int argc, char **argv);
CMF_COMMAND_LIST(X)
#undef X

#endif
