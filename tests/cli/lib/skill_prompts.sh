# skill_prompts.sh — sourced by the skill CLI tests: the two prompt sets of
# different character (English prose; code, numbers and symbols) that
# `cmf skill add --prompts` builds routing blocks from, and the two donors
# (the llama fixture with one tensor perturbed each) the skills come from.

# skill_prompt_sets DIR: writes DIR/prose.txt and DIR/code.txt
skill_prompt_sets() {
    cat >"$1/prose.txt" <<'EOF'
the cat sat on the mat and looked at the door
a quiet morning in the green hills of the north
she reads old books about kings and their castles
we walked along the river until the sun went down
the little dog ran after the red ball in the park
rain fell softly on the roof of the old house
my friend told me a story about a brave knight
the birds sing in the trees when spring comes back
EOF
    cat >"$1/code.txt" <<'EOF'
12 + 34 = 46; 7 * 8 = 56; 90 / 3 = 30
x = [1, 2, 3]; y = {4: 5, 6: 7}
2024-01-15 10:32:07 ERROR 500 /api/v1/42
(3 + 4) * (5 - 2) = 21 # 0x1F 0xFF
for (i = 0; i < 10; i++) { a[i] = i * 2; }
#define MAX(a, b) ((a) > (b) ? (a) : (b))
$ 99.95 + $ 0.05 = $ 100.00 ; 15% off
{"id": 17, "v": [3.14, 2.71], "ok": true}
EOF
}

# skill_donors GEN HF_DIR DIR: DIR/donA (layer 1 down_proj perturbed) and
# DIR/donB (layer 2 v_proj perturbed), written by GEN (test_convert_skill)
skill_donors() {
    "$1" --write-donor "$2" "$3/donA" 0.05 model.layers.1.mlp.down_proj.weight &&
        "$1" --write-donor "$2" "$3/donB" 0.05 model.layers.2.self_attn.v_proj.weight
}
