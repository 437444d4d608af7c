#include "embedlab/quantised_table.hpp"

#include "embedlab/parallel_for.hpp"

#include <algorithm>
#include <map>

#include "embedlab/quant_types.hpp"
#include "io/ggml_quantize.hpp"
#include "io/gguf_quants.hpp"
#include "io/onnx_graph.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

const QuantType& known_type(const std::string& type)
{
    const auto* t = find_quant_type(type);
    if (!t)
        throw InputError("quant type '" + type + "' is not one EmbedLab writes (" + quant_type_names() + ")");
    return *t;
}

int64_t row_bytes(const QuantType& t, int64_t dim)
{
    const int64_t block = t.block_values;
    if (dim < 1 || dim % block != 0)
        throw InputError(std::string(t.name) + " stores blocks of " + std::to_string(block) +
                         " values; a row of " + std::to_string(dim) + " is not a whole number of blocks (" +
                         "the types that fit: " + quant_type_names(dim) + ")");
    return static_cast<int64_t>(io::ggml_row_bytes(t.ggml_type, dim));
}

} // namespace

QuantisedTokenEmbedding::QuantisedTokenEmbedding(const std::string& type, int64_t dim, torch::Tensor blocks)
    : dim_(dim)
{
    const auto& t = known_type(type);
    type_ = t.name;
    ggml_type_ = t.ggml_type;
    const int64_t bytes = row_bytes(t, dim);
    if (blocks.scalar_type() != torch::kUInt8 || blocks.dim() != 2 || blocks.size(1) != bytes)
        throw InputError("quant.blocks must be uint8 [V, " + std::to_string(bytes) + "] (" + type_ +
                         " rows of " + std::to_string(dim) + " values)");
    blocks_ = blocks.contiguous();
}

double QuantisedTokenEmbedding::bits_per_value() const
{
    return known_type(type_).bits_per_value;
}

torch::Tensor QuantisedTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    const torch::Tensor flat = ids.reshape({-1}).to(torch::kLong).contiguous();
    const int64_t n = flat.numel(), vocab = vocab_size(), bytes = blocks_.size(1);
    const int64_t* id = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
        if (id[i] < 0 || id[i] >= vocab)
            throw InputError("token id " + std::to_string(id[i]) + " is outside the table's 0.." +
                             std::to_string(vocab - 1));
    auto out = torch::empty({n, dim_}, torch::kFloat32);
    const uint8_t* src = blocks_.data_ptr<uint8_t>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            io::dequantize_row(ggml_type_, src + id[i] * bytes, dim_, dst + i * dim_);
    });
    auto sizes = ids.sizes().vec();
    sizes.push_back(dim_);
    return out.reshape(sizes);
}

torch::Tensor QuantisedTokenEmbedding::rebuilt_rows() const
{
    return lookup(torch::arange(vocab_size(), torch::kLong));
}

torch::Tensor QuantisedTokenEmbedding::project(const torch::Tensor& hidden) const
{
    return torch::matmul(hidden, rebuilt_rows().t());
}

std::shared_ptr<QuantisedTokenEmbedding> quantise_table(const torch::Tensor& table, const std::string& type,
                                                        const ProgressFn& progress)
{
    const auto& t = known_type(type);
    if (table.dim() != 2)
        throw InputError("quant: the table must be [V, d], got " + std::to_string(table.dim()) +
                         " dimensions");
    const int64_t vocab = table.size(0), dim = table.size(1), bytes = row_bytes(t, dim);
    const torch::Tensor rows = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(rows);
    auto blocks = torch::empty({vocab, bytes}, torch::kUInt8);
    const float* src = rows.data_ptr<float>();
    uint8_t* dst = blocks.data_ptr<uint8_t>();
    // In chunks, so a progress callback can cancel between them.
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 22) / dim);
    for (int64_t first = 0; first < vocab; first += chunk) {
        const int64_t last = std::min(vocab, first + chunk);
        at::parallel_for(first, last, 64, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
                io::quantize_row(t.ggml_type, src + i * dim, dim, dst + i * bytes);
        });
        report_progress(progress, last, vocab);
    }
    return std::make_shared<QuantisedTokenEmbedding>(t.name, dim, std::move(blocks));
}

// --- ONNX export (onnx_export.hpp) ------------------------------------------------

namespace {

// Where a block type keeps its fields, in bytes of the block: the float16 scales
// (and mins), the packed unsigned levels and scales (bit fields), and signed bytes
// (q8_0's levels, q6_k's scales). Each is stored as its own tensor [V, blocks, ..]:
// the same bytes as the blocks, split by field so that the graph reads the halves as
// float16 and the signed bytes as int8 without reinterpreting bits.
struct BlockLayout {
    int64_t half_at = 0, halves = 0;    // float16 values
    int64_t packed_at = 0, packed = 0;  // uint8 bit fields
    int64_t signed_at = 0, signed_ = 0; // int8
};

// One integer per element e of a block: over its parts, bits [shift, shift + width)
// of packed byte `byte`, moved up by `pos` (a part of width 0 adds nothing).
struct Bitfield {
    struct Part {
        std::vector<int64_t> byte, shift, width, pos;
    };
    std::vector<Part> parts;
    Bitfield(int64_t size, int parts_per_value)
        : parts(static_cast<size_t>(parts_per_value),
                Part{std::vector<int64_t>(static_cast<size_t>(size), 0),
                     std::vector<int64_t>(static_cast<size_t>(size), 0),
                     std::vector<int64_t>(static_cast<size_t>(size), 0),
                     std::vector<int64_t>(static_cast<size_t>(size), 0)})
    {
    }
    void set(int64_t e, int part, int64_t byte, int64_t shift, int64_t width, int64_t pos = 0)
    {
        auto& p = parts[static_cast<size_t>(part)];
        const auto i = static_cast<size_t>(e);
        p.byte[i] = byte;
        p.shift[i] = shift;
        p.width[i] = width;
        p.pos[i] = pos;
    }
};

// The packed bytes [n, blocks, P] uint8 -> the bit fields' integers [n, blocks, size]
// int32: (byte / 2^shift) mod 2^width * 2^pos, summed over the parts.
class BitReader {
public:
    BitReader(onnx::Graph& g, std::string bytes, std::string type)
        : g_(g), bytes_(std::move(bytes)), type_(std::move(type))
    {
    }

    std::string read(const Bitfield& f, const std::string& what)
    {
        std::string sum;
        for (size_t i = 0; i < f.parts.size(); ++i) {
            const auto& p = f.parts[i];
            const auto part = what + "." + std::to_string(i); // each constant's own name
            auto v = g_.cast(g_.gather(bytes_, index(part, p.byte), 2), onnx::kInt32);
            const auto divisor = powers(p.shift), modulus = powers(p.width), factor = powers(p.pos);
            if (!all_equal(divisor, 1))
                v = g_.div(v, constant(part + ".div", divisor));
            if (!all_equal(modulus, 256))
                v = g_.op("Mod", {v, constant(part + ".mod", modulus)});
            if (!all_equal(factor, 1))
                v = g_.mul(v, constant(part + ".mul", factor));
            sum = sum.empty() ? v : g_.add(sum, v);
        }
        return sum;
    }

private:
    static std::vector<int64_t> powers(const std::vector<int64_t>& exponents)
    {
        std::vector<int64_t> out;
        for (auto e : exponents)
            out.push_back(int64_t{1} << e);
        return out;
    }
    static bool all_equal(const std::vector<int64_t>& v, int64_t x)
    {
        return std::all_of(v.begin(), v.end(), [&](int64_t y) { return y == x; });
    }
    // Byte offsets (< 256) stored as uint8 and widened in the graph.
    std::string index(const std::string& what, const std::vector<int64_t>& bytes)
    {
        return g_.cast(g_.initializer_once("quant." + type_ + "." + what + ".byte",
                                           [&] { return torch::tensor(bytes).to(torch::kUInt8); }),
                       onnx::kInt64);
    }
    // int32 constants, stored as uint8 when they fit (they are constant-folded).
    std::string constant(const std::string& what, const std::vector<int64_t>& values)
    {
        const auto t = torch::tensor(values);
        const bool small = t.max().item<int64_t>() < 256;
        const auto stored = g_.initializer_once("quant." + type_ + "." + what,
                                                [&] { return t.to(small ? torch::kUInt8 : torch::kInt32); });
        return small ? g_.cast(stored, onnx::kInt32) : stored;
    }

    onnx::Graph& g_;
    std::string bytes_, type_;
};

// Q4_K / Q5_K's eight 6-bit scales (mins: `min`) in 12 bytes at `at` (scale_min_k4).
Bitfield k4_scales(int64_t at, bool min)
{
    Bitfield f(8, 2);
    for (int64_t j = 0; j < 8; ++j) {
        if (j < 4) {
            f.set(j, 0, at + j + (min ? 4 : 0), 0, 6);
        } else {
            f.set(j, 0, at + j + 4, min ? 4 : 0, 4);
            f.set(j, 1, at + (min ? j : j - 4), 6, 2, 4);
        }
    }
    return f;
}

} // namespace

// ggml's block types dequantised in the graph exactly as dequantize_row() does (the same
// float32 operations, so the rows agree bit for bit): the looked-up rows' blocks are
// gathered, their bit fields read with integer Div/Mod/Mul, their float16 scales cast.
// Stored: the blocks' bytes split by field (BlockLayout), nothing more; f16 and bf16
// rows are stored as float16 / bfloat16 [V, d]. A type without a dequantisation here
// falls back to float16 rows [V, d] (noted in the export report).
std::string QuantisedTokenEmbedding::onnx_lookup(onnx::Graph& g, const std::string& ids) const
{
    const auto flat = g.reshape(ids, {-1});
    const auto shaped = [&](const std::string& rows) {
        return g.reshape_to(rows, g.concat({g.op("Shape", {ids}), g.ints({dim_})}, 0));
    };
    const int64_t V = vocab_size();
    if (type_ == "f16" || type_ == "bf16")
        return shaped(
            g.cast(g.gather(g.initializer("embed.quant_rows",
                                          blocks_.view(type_ == "f16" ? torch::kFloat16 : torch::kBFloat16)),
                            flat),
                   onnx::kFloat));

    static const std::map<std::string, BlockLayout> layouts{
        {"q4_0", {.half_at = 0, .halves = 1, .packed_at = 2, .packed = 16}},
        {"q4_1", {.half_at = 0, .halves = 2, .packed_at = 4, .packed = 16}},
        {"q5_0", {.half_at = 0, .halves = 1, .packed_at = 2, .packed = 20}},
        {"q5_1", {.half_at = 0, .halves = 2, .packed_at = 4, .packed = 20}},
        {"q8_0", {.half_at = 0, .halves = 1, .signed_at = 2, .signed_ = 32}},
        {"q2_k", {.half_at = 80, .halves = 2, .packed_at = 0, .packed = 80}},
        {"q3_k", {.half_at = 108, .halves = 1, .packed_at = 0, .packed = 108}},
        {"q4_k", {.half_at = 0, .halves = 2, .packed_at = 4, .packed = 140}},
        {"q5_k", {.half_at = 0, .halves = 2, .packed_at = 4, .packed = 172}},
        {"q6_k",
         {.half_at = 208, .halves = 1, .packed_at = 0, .packed = 192, .signed_at = 192, .signed_ = 16}},
    };
    const auto found = layouts.find(type_);
    if (found == layouts.end()) {
        g.note("the " + type_ + " token table is stored as float16 rows (" + std::to_string(V * dim_ * 2) +
               " bytes, not its " + std::to_string(blocks_.numel()) +
               "): ONNX export has no dequantisation of " + type_ + " in standard operators");
        return shaped(g.cast(g.gather(g.initializer_once("embed.quant_rows",
                                                         [&] { return rebuilt_rows().to(torch::kFloat16); }),
                                      flat),
                             onnx::kFloat));
    }
    const auto& L = found->second;
    const int64_t Q = find_quant_type(type_)->block_values, nb = dim_ / Q;
    const int64_t block = blocks_.size(1) / nb;
    const auto blocks = blocks_.view({V, nb, block});
    auto field = [&](const char* name, int64_t at, int64_t bytes, torch::ScalarType type) {
        const auto stored = g.initializer_once(std::string("embed.quant_") + name, [&] {
            const auto t = blocks.narrow(2, at, bytes).contiguous();
            return type == torch::kUInt8 ? t : t.view(type);
        });
        return g.gather(stored, flat); // [n, nb, ..]
    };
    const auto halves = g.cast(field("scales", L.half_at, 2 * L.halves, torch::kFloat16), onnx::kFloat);
    auto half = [&](int64_t i) { return g.slice(halves, {i}, {i + 1}, {2}); }; // [n, nb, 1]
    const auto d = half(0);
    BitReader bits(g, L.packed ? field("packed", L.packed_at, L.packed, torch::kUInt8) : std::string(),
                   type_);
    auto as_float = [&](const std::string& x) { return g.cast(x, onnx::kFloat); };
    // Per group of `size` values: y = scale[group] * levels (or minus min[group]).
    auto grouped = [&](const std::string& levels, int64_t size) {
        return g.reshape(levels, {-1, nb, Q / size, size});
    };
    auto per_group = [&](const std::string& x) { return g.unsqueeze(x, {3}); };

    std::string y;
    if (type_ == "q8_0") {
        y = g.mul(as_float(field("levels", L.signed_at, L.signed_, torch::kInt8)), d);
    } else if (type_ == "q4_0" || type_ == "q4_1" || type_ == "q5_0" || type_ == "q5_1") {
        // Weight j and j + 16 share byte j: low and high nibble; q5: bit e of qh is the fifth.
        const bool fifth = type_[1] == '5', with_min = type_[3] == '1';
        Bitfield f(Q, fifth ? 2 : 1);
        for (int64_t e = 0; e < Q; ++e) {
            f.set(e, 0, (fifth ? 4 : 0) + e % 16, 4 * (e / 16), 4);
            if (fifth)
                f.set(e, 1, e / 8, e % 8, 1, 4);
        }
        const auto x = as_float(bits.read(f, "levels"));
        y = with_min ? g.add(g.mul(x, d), half(1)) : g.mul(g.sub(x, g.scalar(fifth ? 16.0f : 8.0f)), d);
    } else if (type_ == "q2_k" || type_ == "q3_k") {
        // Levels: 2 bits, byte l of each 32-byte half holding weights l, l+32, l+64, l+96
        // of its 128; q3_k adds bit (e / 32) of hmask[e % 32] as the third (+4, then -4).
        const bool q3 = type_ == "q3_k";
        const int64_t qs = q3 ? 32 : 16;
        Bitfield f(Q, q3 ? 2 : 1);
        for (int64_t e = 0; e < Q; ++e) {
            const int64_t n128 = e / 128, j = e % 128 / 32, within = e % 32;
            f.set(e, 0, qs + 32 * n128 + within, 2 * j, 2);
            if (q3)
                f.set(e, 1, within, 4 * n128 + j, 1, 2);
        }
        auto levels = grouped(as_float(bits.read(f, "levels")), 16);
        if (q3) {
            // 16 signed 6-bit scales (+32): low 4 bits two a byte in scales[0..8), high 2
            // bits four a byte in scales[8..12).
            Bitfield s(16, 2);
            for (int64_t i = 0; i < 16; ++i) {
                s.set(i, 0, 96 + i % 8, i < 8 ? 0 : 4, 4);
                s.set(i, 1, 104 + i % 4, 2 * (i / 4), 2, 4);
            }
            const auto dl = g.mul(d, g.sub(as_float(bits.read(s, "scales")), g.scalar(32)));
            y = g.mul(per_group(dl), g.sub(levels, g.scalar(4)));
        } else {
            // Each scales byte: a 4-bit scale (low) and min (high).
            Bitfield s(16, 1), m(16, 1);
            for (int64_t i = 0; i < 16; ++i) {
                s.set(i, 0, i, 0, 4);
                m.set(i, 0, i, 4, 4);
            }
            const auto dl = g.mul(d, as_float(bits.read(s, "scales"))),
                       ml = g.mul(half(1), as_float(bits.read(m, "mins")));
            y = g.sub(g.mul(per_group(dl), levels), per_group(ml));
        }
    } else if (type_ == "q4_k" || type_ == "q5_k") {
        // Sub-blocks of 32: weights j*64 + l low nibbles, j*64 + 32 + l high nibbles of
        // ql[32 j + l]; q5_k's fifth bit is bit 2j (low) or 2j + 1 (high) of qh[l].
        const bool fifth = type_ == "q5_k";
        const int64_t ql = fifth ? 44 : 12;
        Bitfield f(Q, fifth ? 2 : 1);
        for (int64_t e = 0; e < Q; ++e) {
            const int64_t j = e / 64, high = e % 64 / 32, l = e % 32;
            f.set(e, 0, ql + 32 * j + l, 4 * high, 4);
            if (fifth)
                f.set(e, 1, 12 + l, 2 * j + high, 1, 4);
        }
        const auto levels = grouped(as_float(bits.read(f, "levels")), 32);
        const auto d1 = g.mul(d, as_float(bits.read(k4_scales(0, false), "scales")));
        const auto m1 = g.mul(half(1), as_float(bits.read(k4_scales(0, true), "mins")));
        y = g.sub(g.mul(per_group(d1), levels), per_group(m1));
    } else { // q6_k
        // Weight n*128 + k*32 + l: low 4 bits from ql[64 n + 32 (k % 2) + l] (nibble k / 2),
        // high 2 bits from qh[32 n + l] (bits 2k); minus 32. int8 scales per 16.
        Bitfield f(Q, 2);
        for (int64_t e = 0; e < Q; ++e) {
            const int64_t n = e / 128, k = e % 128 / 32, l = e % 32;
            f.set(e, 0, 64 * n + 32 * (k % 2) + l, 4 * (k / 2), 4);
            f.set(e, 1, 128 + 32 * n + l, 2 * k, 2, 4);
        }
        const auto levels = g.sub(grouped(as_float(bits.read(f, "levels")), 16), g.scalar(32));
        const auto scale = g.mul(d, as_float(field("signed_scales", L.signed_at, L.signed_, torch::kInt8)));
        y = g.mul(per_group(scale), levels);
    }
    return shaped(g.reshape(y, {-1, dim_}));
}

} // namespace embedlab
