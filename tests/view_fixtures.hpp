// Representative data for every view, as the app's jobs and the demo feed them
// (a 128-wide bundled model of 8 layers, the demo's results table): for tests
// that look at whole figures (views_figure_layout_test.cpp) and the figure tests.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <cmath>
#include <limits>

#include "embedlab/results.hpp"
#include "fourier_map_view.hpp"
#include "neighbour_graph_view.hpp"
#include "parameter_breakdown_chart.hpp"
#include "rank_allocation_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "token_damage_view.hpp"

namespace embedlab::test {

inline const QString kFixtureModel = "../shared/models/tinystories-8m/model.gguf";

// A d = 128 embedding's spectrum: eigenvalues over three decades.
inline views::SpectrumData spectrum_fixture(int d = 128)
{
    views::SpectrumData s;
    s.label = kFixtureModel;
    double total = 0;
    for (int i = 0; i < d; ++i) {
        s.eigenvalues << 2.0 * std::pow(0.95, i) + 0.002;
        total += s.eigenvalues.back();
    }
    double sum = 0;
    for (int i = 0; i < d; ++i) {
        sum += s.eigenvalues[i];
        s.explained << sum / total;
        s.params_at_rank << 32000.0 * (i + 1) + (i + 1) * d + d;
        s.flops_at_rank << 2.0 * (i + 1) * d;
    }
    s.original_params = 32000.0 * d;
    return s;
}

// Another model and FLAT-LLM's value heads of 8 layers (4 heads each), as the
// Spectrum tab overlays them.
inline QVector<views::SpectrumOverlay> spectrum_overlays_fixture()
{
    QVector<views::SpectrumOverlay> o;
    QVector<double> other;
    for (int i = 0; i < 96; ++i)
        other << std::pow(0.9, i);
    o.push_back({"tinyllama-1.1b-chat.Q8_0.gguf", other, {}});
    for (int l = 0; l < 8; ++l)
        for (int h = 0; h < 4; ++h) {
            QVector<double> e;
            for (int i = 0; i < 32; ++i)
                e << std::pow(0.8 + 0.01 * l, i) * (1 + 0.1 * h);
            o.push_back({QString("layer %1 head %2").arg(l).arg(h), e, QString("layer %1").arg(l)});
        }
    return o;
}

// IPRS allocations of 8 decoder layers at ratios 0.1 .. 0.9.
inline views::RankAllocationData allocation_fixture(int layers = 8)
{
    views::RankAllocationData a;
    a.label = kFixtureModel;
    a.d_head = 32;
    for (int l = 0; l < layers; ++l)
        a.normalised << 0.4 + 0.6 * std::sin(0.3 + 2.8 * l / layers);
    for (int r = 1; r <= 9; ++r) {
        views::Allocation al;
        al.remaining = r / 10.0;
        for (int l = 0; l < layers; ++l) {
            al.w << std::min(1.0, al.remaining * a.normalised[l] / 0.7);
            al.ranks << std::max(1, static_cast<int>(al.w.back() * a.d_head));
        }
        a.allocations << al;
    }
    return a;
}

// T and the original rows of 256 ids at d = 128, as the Fourier tab shows them.
inline views::FourierMapData fourier_fixture(int count = 256, int dim = 128)
{
    views::FourierMapData d;
    d.label = kFixtureModel;
    d.first = 0;
    d.count = count;
    d.dim = dim;
    for (const char* name : {"T", "original"}) {
        views::FourierMatrix m;
        m.name = name;
        for (int i = 0; i < count; ++i)
            for (int j = 0; j < dim; ++j)
                m.values << std::sin(0.05 * i * (j / 2 + 1) + j) * (name[0] == 'T' ? 1.0 : 0.1);
        for (int i = 0; i + 1 < count; ++i)
            m.neighbour << (name[0] == 'T' ? 0.99 : 0.1 * std::sin(0.7 * i));
        d.matrices << m;
    }
    return d;
}

// TT candidates at a small d (the bundled model's 128): every shape stores more
// than the table at eps 0.2 and 0.4 except the coarsest eps of one shape.
inline views::TensorTrainData tt_fixture()
{
    views::TensorTrainData t;
    t.label = kFixtureModel;
    t.vocab = 32000;
    t.dim = 128;
    const QStringList shapes{"4x4x8", "2x8x8", "2x4x4x4", "8x16"};
    for (int s = 0; s < shapes.size(); ++s)
        for (double eps : {0.2, 0.4}) {
            views::TensorTrainCandidate c;
            c.shape = shapes[s];
            c.ranks = "1,4,6,1";
            c.eps = eps;
            c.ratio = (eps < 0.3 ? 1.9 : 0.8) + 0.2 * s;
            c.relative_error = eps * 0.9;
            c.mean_cosine = 1 - eps;
            c.svd_rank = 30;
            c.energy_original = 5, c.energy_tt = 7.5, c.energy_svd = 2.5;
            c.accesses_original = 1, c.accesses_tt = 1.2, c.accesses_svd = 0.5;
            c.operations_original = 0, c.operations_tt = 1.5, c.operations_svd = 0.3;
            t.candidates << c;
        }
    t.chosen = 1;
    return t;
}

// The parts of a small llama.
inline views::ParameterBreakdownData breakdown_fixture()
{
    views::ParameterBreakdownData d;
    d.bars = {{"token embedding", 4096000},
              {"attention (8 layers)", 524288},
              {"MLP (8 layers)", 1572864},
              {"norms", 2176},
              {"output head", 4096000}};
    d.highlighted = 0;
    return d;
}

// pca against lle at the same bytes over 8 frequency buckets.
inline views::TokenDamageData damage_fixture(int buckets = 8)
{
    views::TokenDamageData d;
    d.label = kFixtureModel;
    for (int b = 0; b < buckets; ++b)
        d.buckets << (b < 2 ? QString::number(b) : QString("%1-%2").arg(1 << (b - 1)).arg((1 << b) - 1));
    for (const char* name : {"pca rank 13 (token_embedding)", "lle keep 0.5, k 8 (token_embedding)"}) {
        views::TokenDamageRun r;
        r.name = name;
        for (int b = 0; b < buckets; ++b) {
            r.tokens << 1000.0 / (b + 1);
            r.positions << 10.0 * b;
            r.kl_as_target << (b == 0 ? std::numeric_limits<double>::quiet_NaN() : 0.5 / b);
            r.kl_as_input << 0.3 / (b + 1);
            r.cosine << std::min(1.0, 0.6 + 0.03 * b);
        }
        r.kl_mean = 0.12;
        d.runs << r;
    }
    return d;
}

// The demo's table (demo --quick on the bundled model): every method, a flat run
// on the attention values, the quantised baselines, and a Fourier run far off
// (delta ln PPL 53) that a linear axis would squash the rest under.
inline std::vector<RunSummary> results_fixture()
{
    struct Row {
        const char* method;
        const char* parameters;
        const char* part;
        double ratio, bytes_ratio, delta;
    };
    const Row rows[] = {
        {"pca", "rank 16", "token_embedding", 0.13, 0.13, 0.42},
        {"svd", "rank 16", "token_embedding", 0.13, 0.13, 0.45},
        {"tt", "shape 4x4x8, eps 0.4, ranks 1,4,6,1", "token_embedding", 1.27, 1.27, 0.012},
        {"lle", "keep 0.5, k 4", "token_embedding", 0.52, 0.52, 0.08},
        {"fourier", "mlp linear, 20 steps", "token_embedding", 0.004, 0.004, 53.0},
        {"flat", "remaining 0.5 (iprs)", "attention_values", 0.5, std::nan(""), 0.9},
        {"pca", "rank 16, LoRA 4 (10 steps)", "token_embedding", 0.14, 0.14, 0.31},
        {"quant", "q8_0", "token_embedding", 1.0, 0.27, 0.0004},
        {"quant", "q4_0", "token_embedding", 1.0, 0.14, 0.02},
    };
    std::vector<RunSummary> out;
    for (const auto& r : rows) {
        RunSummary s;
        s.method = r.method;
        s.parameters = r.parameters;
        s.part = r.part;
        s.ratio = r.ratio;
        s.delta_ln_ppl = r.delta;
        s.ppl_original = 10;
        s.ppl = 10 * std::exp(r.delta);
        s.params_before = 4096000;
        s.params_after = static_cast<int64_t>(4096000 * r.ratio);
        s.model = kFixtureModel.toStdString();
        s.eval_text = "../shared/data/tinystories-sample.txt";
        s.host = "ci";
        s.eval_tokens = 512;
        if (std::isfinite(r.bytes_ratio)) {
            s.bytes_before = 4096000.0 * 4;
            s.bytes_after = s.bytes_before * r.bytes_ratio;
        }
        s.kl_mean = r.delta * 0.8;
        s.top1_agreement = std::exp(-r.delta);
        for (int w = 0; w < 4; ++w) {
            s.window_kl.push_back(s.kl_mean * (0.8 + 0.1 * w));
            s.window_top1.push_back(s.top1_agreement);
        }
        out.push_back(s);
    }
    return out;
}

// 40 common tokens on a ring; rare token 40 + i sits at the centre, and its 8
// neighbours are common tokens packed within a few pixels of each other, so
// labels written where their points are would cover one another.
inline views::NeighbourGraphData neighbour_fixture(int k = 8)
{
    views::NeighbourGraphData d;
    d.k = k;
    const int C = 40, R = 20;
    for (int id = 0; id < C + R; ++id) {
        double x, y;
        if (id < k) { // the crowd: within 0.05 of (1, 1) on a range of about 20
            x = 1.0 + 0.01 * (id % 3);
            y = 1.0 + 0.012 * (id / 3);
        } else if (id < C) {
            x = 9 * std::cos(id * 0.3);
            y = 9 * std::sin(id * 0.3);
        } else {
            x = 4 * std::cos(id * 0.7);
            y = 4 * std::sin(id * 0.7);
        }
        d.x << x;
        d.y << y;
        d.tokens << (id < C ? QString("common%1").arg(id) : QString("rare%1").arg(id));
        (id < C ? d.common : d.rare) << id;
    }
    d.tokens[3] = " the, \"quoted\"\n"; // escaped and quoted in the CSV
    for (int i = 0; i < R; ++i) {
        for (int j = 0; j < k; ++j) {
            d.neighbours << j;
            d.weights << (j + 1.0) / (k * (k + 1) / 2.0); // 1/36 ... 8/36: sum 1
            d.neighbour_cosine << 0.9 - 0.05 * j;
        }
        d.cosine << 0.3 + 0.035 * i;
    }
    d.histogram = QVector<double>(10, 2);
    return d;
}

} // namespace embedlab::test
