// A screenshot, not a check (run with --gtest_also_run_disabled_tests and
// EMBEDLAB_MAP_SHOT_MODEL=<a model directory>, e.g. `embedlab-cli synth --like
// qwen2.5-0.5b`): the neighbour map of the model's whole table, as the workbench
// computes it (app/analyses_maps.cpp: frequency split on the bundled sample text,
// PCA, LLE with k = 5), with density shading and a lasso selection; then the same
// with a t-SNE layout. PNGs under EMBEDLAB_MAP_SHOT_DIR (default /tmp).
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/layout_2d.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/model.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/resources.hpp"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QMouseEvent>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "gui_test_support.hpp"
#include "neighbour_graph_view.hpp"

namespace {

QVector<double> doubles(const torch::Tensor& t)
{
    const auto d = t.to(torch::kDouble).contiguous();
    return QVector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

} // namespace

TEST(NeighbourMapShot, DISABLED_AWholeTableWithDensityShadingAndALasso)
{
    const QString model = qEnvironmentVariable("EMBEDLAB_MAP_SHOT_MODEL");
    if (model.isEmpty())
        GTEST_SKIP() << "set EMBEDLAB_MAP_SHOT_MODEL";
    const QString dir = qEnvironmentVariable("EMBEDLAB_MAP_SHOT_DIR", "/tmp");
    auto lm = embedlab::load_model(model.toStdString());
    const torch::Tensor table = *embedlab::dense_table(&lm.model->token_embedding());
    const int64_t V = table.size(0);
    const auto ids = lm.tokenizer->encode(embedlab::read_text_file(embedlab::default_sample_text_path()));
    const auto split = embedlab::split_by_frequency(ids, V, 0.5, embedlab::special_token_ids(*lm.tokenizer));
    const auto pca = embedlab::fit_low_rank(table, embedlab::LowRankKind::PCA, 2);
    embedlab::views::NeighbourGraphData d;
    d.label = model;
    d.x = doubles(pca.Z.select(1, 0));
    d.y = doubles(pca.Z.select(1, 1));
    for (auto id : split.common)
        d.common << static_cast<int>(id);
    for (auto id : split.rare)
        d.rare << static_cast<int>(id);
    for (auto c : split.counts)
        d.frequency << static_cast<double>(c);
    d.k = 5;
    auto fit = embedlab::fit_partial_sparse(table, split, {.kind = embedlab::PartialSparseKind::LLE, .k = 5});
    const auto near = fit.neighbour_ids.contiguous();
    for (int64_t i = 0; i < near.numel(); ++i)
        d.neighbours << static_cast<int>(near.data_ptr<int64_t>()[i]);
    d.weights = doubles(fit.weights);
    const embedlab::PartialSparseTokenEmbedding lle(std::move(fit));
    const auto rare_ids = torch::tensor(split.rare, torch::kLong);
    for (int64_t s = 0; s < rare_ids.size(0); s += 4096) {
        const int64_t e = std::min<int64_t>(rare_ids.size(0), s + 4096);
        const auto rows = table.index_select(0, rare_ids.slice(0, s, e)).to(torch::kDouble);
        d.cosine +=
            doubles(torch::cosine_similarity(lle.rare_rows(s, e - s).to(torch::kDouble), rows, 1, 1e-12));
    }
    d.histogram = QVector<double>(40, 0);
    for (double c : d.cosine)
        d.histogram[std::clamp(static_cast<int>(c * 40), 0, 39)] += 1;
    for (int64_t id = 0; id < V; ++id)
        d.tokens << QString::fromStdString(id < lm.tokenizer->vocab_size()
                                               ? lm.tokenizer->token_text(static_cast<int32_t>(id))
                                               : std::string());

    embedlab::views::NeighbourGraphView view;
    view.setData(d);
    view.resize(1400, 900);
    view.setAttribute(Qt::WA_DontShowOnScreen);
    view.show();
    QApplication::processEvents();
    view.densityToggle()->setChecked(true);
    view.dragChooser()->setCurrentIndex(embedlab::views::NeighbourGraphView::Lasso);
    view.plot()->replot();
    auto shoot = [&](const QString& file) {
        QCustomPlot* plot = view.plot();
        const QRectF r = plot->axisRect()->rect();
        const QPointF c = r.center() + QPointF(r.width() * 0.12, -r.height() * 0.1);
        QVector<QPointF> path;
        for (int a = 0; a <= 24; ++a) { // a lumpy loop right of the centre
            const double t = a * 2 * M_PI / 24, radius = 0.12 * r.height() * (1 + 0.25 * std::sin(3 * t));
            path << c + QPointF(radius * 1.3 * std::cos(t), radius * std::sin(t));
        }
        embedlab::test::drag(plot, path);
        view.search(d.tokens.value(split.common.empty() ? 0 : static_cast<int>(split.common.front())));
        view.selectToken(d.rare.value(d.rare.size() / 2));
        plot->replot();
        QApplication::processEvents();
        ASSERT_TRUE(view.grab().save(file));
        std::printf("%s: %lld tokens, %lld selected\n", qPrintable(file), static_cast<long long>(V),
                    static_cast<long long>(view.selectedTokens().size()));
    };
    shoot(dir + "/neighbour-150k.png");

    const auto t = embedlab::tsne_layout(table.to(torch::kFloat32).contiguous().data_ptr<float>(), V,
                                         table.size(1), {.seed = 0});
    embedlab::views::NeighbourMapLayout layout{"t-SNE",
                                               {},
                                               {},
                                               {},
                                               "t-SNE over 5000 sampled tokens (perplexity 30, "
                                               "1000 iterations, seed 0)."};
    layout.x = QVector<double>(t.x.begin(), t.x.end());
    layout.y = QVector<double>(t.y.begin(), t.y.end());
    for (auto s : t.sample)
        layout.sample << static_cast<int>(s);
    view.setLayout(layout);
    shoot(dir + "/neighbour-150k-tsne.png");
}
