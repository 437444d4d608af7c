// The tied head straight from a quant table's ggml blocks (issue 63 item 3): generation
// reads every row of the head per token, and q8_0 / q4_0 blocks are 34 / 18 bytes per 32
// values against 128 as float rows. Each block's dot product with the hidden state is
// summed in float, then scaled by the block's half-precision scale, as ggml's blocks
// define the values (d * q); only the order of the float sums differs from the dense head.
// QuantisedTokenEmbedding's block_head capability (model.hpp); LanguageModel::block_head
// asks any table for it.
#include "embedlab/parallel_for.hpp"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "embedlab/error.hpp"
#include "embedlab/quantised_table.hpp"
#include "io/gguf_quants.hpp"

namespace embedlab {

namespace {

constexpr int64_t kBlock = 32;                  // values per q8_0 / q4_0 block
constexpr int64_t kQ8Bytes = 34, kQ4Bytes = 18; // half scale, then the quants
enum class BlockType { None, Q8_0, Q4_0 };

BlockType block_type(const std::string& type, int64_t dim)
{
    if (dim % kBlock != 0)
        return BlockType::None;
    return type == "q8_0" ? BlockType::Q8_0 : type == "q4_0" ? BlockType::Q4_0 : BlockType::None;
}

// The 32 values of block `b` as integers (q8_0: q; q4_0: nibble - 8), before the scale.
void block_quants(BlockType t, const uint8_t* block, int32_t out[kBlock])
{
    if (t == BlockType::Q8_0) {
        for (int i = 0; i < kBlock; ++i)
            out[i] = static_cast<int8_t>(block[2 + i]);
        return;
    }
    for (int i = 0; i < kBlock / 2; ++i) {
        out[i] = (block[2 + i] & 0x0F) - 8;
        out[i + kBlock / 2] = (block[2 + i] >> 4) - 8;
    }
}

float scale_of(const uint8_t* block)
{
    return io::half_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
}

float row_dot_scalar(BlockType t, const uint8_t* row, int64_t blocks, int64_t bytes, const float* h)
{
    float sum = 0;
    int32_t q[kBlock];
    for (int64_t b = 0; b < blocks; ++b, row += bytes, h += kBlock) {
        block_quants(t, row, q);
        float s = 0;
        for (int i = 0; i < kBlock; ++i)
            s += static_cast<float>(q[i]) * h[i];
        sum += scale_of(row) * s;
    }
    return sum;
}

#if defined(__x86_64__)
// 8 quants (int8 in the low 8 bytes of `q`) times 8 hidden values, added to `acc`.
__attribute__((target("avx2,fma"))) inline __m256 fma8(__m128i q, const float* h, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_loadu_ps(h), acc);
}

__attribute__((target("avx2,fma,f16c"))) float row_dot_avx2(BlockType t, const uint8_t* row, int64_t blocks,
                                                            int64_t bytes, const float* h)
{
    __m256 sum = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b, row += bytes, h += kBlock) {
        __m128i lo, hi; // values 0..15 and 16..31 as int8
        if (t == BlockType::Q8_0) {
            lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2));
            hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 18));
        } else {
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2));
            const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
            lo = _mm_sub_epi8(_mm_and_si128(packed, mask), eight);
            hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), eight);
        }
        __m256 s = fma8(lo, h, _mm256_setzero_ps());
        s = fma8(_mm_srli_si128(lo, 8), h + 8, s);
        s = fma8(hi, h + 16, s);
        s = fma8(_mm_srli_si128(hi, 8), h + 24, s);
        sum = _mm256_fmadd_ps(_mm256_set1_ps(scale_of(row)), s, sum);
    }
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}
#endif

} // namespace

bool QuantisedTokenEmbedding::has_block_head() const
{
    return block_type(type_, dim_) != BlockType::None;
}

torch::Tensor QuantisedTokenEmbedding::block_head(const torch::Tensor& hidden) const
{
    const BlockType t = block_type(type_, dim_);
    if (t == BlockType::None)
        return {};
    c10::InferenceMode guard;
    const auto h = hidden.to(torch::kFloat32).contiguous();
    const int64_t N = h.size(0), V = vocab_size(), d = dim_, blocks = d / kBlock;
    const int64_t bytes = t == BlockType::Q8_0 ? kQ8Bytes : kQ4Bytes;
    if (blocks_.size(1) != blocks * bytes || !blocks_.is_contiguous())
        throw InputError("block_head: the quant table's rows are not " + std::to_string(blocks) +
                         " blocks of " + std::to_string(bytes) + " bytes");
#if defined(__x86_64__)
    static const bool avx2 =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const auto dot = avx2 ? row_dot_avx2 : row_dot_scalar;
#else
    const auto dot = row_dot_scalar;
#endif
    auto logits = torch::empty({N, V}, torch::kFloat32);
    const uint8_t* rows = blocks_.data_ptr<uint8_t>();
    const int64_t row_bytes = blocks_.size(1);
    float* out = logits.data_ptr<float>();
    const float* hv = h.data_ptr<float>();
    at::parallel_for(0, V, 2048, [&](int64_t begin, int64_t end) {
        for (int64_t n = 0; n < N; ++n)
            for (int64_t v = begin; v < end; ++v)
                out[n * V + v] = dot(t, rows + v * row_bytes, blocks, bytes, hv + n * d);
    });
    return logits;
}

} // namespace embedlab
