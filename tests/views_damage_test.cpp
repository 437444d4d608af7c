// Which tokens suffer (issue 39 part 3) in the workbench: the damage-by-frequency
// plot draws its struct's numbers, the neighbour graph coloured by a per-token
// damage draws the worst token last, and the LLE tab's damage panel measures a
// results row of the bundled model as the engine does.
//
// libtorch before Qt (its `slots` macro).
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/token_damage.hpp"

#include <QApplication>
#include <QFile>
#include <QTabWidget>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "damage_tab.hpp"
#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "model_summary.hpp"
#include "neighbour_graph_view.hpp"
#include "results_view.hpp"
#include "token_damage_view.hpp"

using embedlab::app::DamagePanel;
using embedlab::app::MainWindow;
using embedlab::views::NeighbourGraphData;
using embedlab::views::NeighbourGraphView;
using embedlab::views::TokenDamageData;
using embedlab::views::TokenDamageView;

using embedlab::test::wait_for;

namespace {

// Red is red, blue is blue: a drawn pixel against a band's colour, antialiasing aside.
bool near(const QColor& a, const QColor& b, int tolerance = 30)
{
    return std::abs(a.red() - b.red()) <= tolerance && std::abs(a.green() - b.green()) <= tolerance &&
           std::abs(a.blue() - b.blue()) <= tolerance;
}

QColor drawn_at(QCustomPlot* plot, double x, double y, QCPAxis* value_axis = nullptr)
{
    plot->replot();
    const QImage image = plot->toPixmap().toImage();
    const QPointF p(plot->xAxis->coordToPixel(x), (value_axis ? value_axis : plot->yAxis)->coordToPixel(y));
    return image.pixelColor(p.toPoint());
}

TokenDamageData two_runs()
{
    TokenDamageData d;
    d.label = "tiny";
    d.buckets = {"0", "1", "2-3", "4-7", "8-15"};
    embedlab::views::TokenDamageRun pca{"pca rank 13",
                                        {900, 40, 30, 20, 10},
                                        {0, 40, 75, 100, 110},
                                        {NAN, 0.63, 0.66, 0.67, 0.64},
                                        {NAN, 0.56, 0.57, 0.52, 0.64},
                                        {0.40, 0.56, 0.57, 0.58, 0.62},
                                        0.56};
    embedlab::views::TokenDamageRun lle{"lle keep 0.9",
                                        {900, 40, 30, 20, 10},
                                        {0, 40, 75, 100, 110},
                                        {NAN, 0.13, 0.08, 0.09, 0.07},
                                        {NAN, 0.30, 0.18, 0.15, 0.06},
                                        {0.51, 0.75, 0.84, 0.87, 0.95},
                                        0.06};
    d.runs = {pca, lle};
    return d;
}

} // namespace

TEST(TokenDamageView, BarsAndPointsAreTheStructsValuesSideBySidePerBucket)
{
    TokenDamageView view;
    const auto d = two_runs();
    view.setData(d);
    embedlab::test::settle(view);
    for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE(r);
        QCPBars* bars = view.klBars(r);
        QCPGraph* cos = view.cosineGraph(r);
        ASSERT_TRUE(bars && cos);
        EXPECT_EQ(cos->valueAxis(), view.plot()->yAxis2);
        // Bucket 0 is never a target: no bar, but its rows' cosine is a point.
        ASSERT_EQ(bars->data()->size(), 4);
        ASSERT_EQ(cos->data()->size(), 5);
        for (int b = 1; b < 5; ++b) {
            const auto bar = bars->data()->at(b - 1);
            EXPECT_DOUBLE_EQ(bar->value, d.runs[r].kl_as_target[b]);
            EXPECT_NEAR(bar->key, b, 0.5); // within its bucket
            EXPECT_DOUBLE_EQ(cos->data()->at(b)->value, d.runs[r].cosine[b]);
            EXPECT_DOUBLE_EQ(cos->data()->at(b)->key, bar->key); // the point over its run's bar
        }
        EXPECT_DOUBLE_EQ(cos->data()->at(0)->value, d.runs[r].cosine[0]);
    }
    // pca left of lle in every bucket, and the ticks name the buckets.
    for (int b = 0; b < 4; ++b)
        EXPECT_LT(view.klBars(0)->data()->at(b)->key, view.klBars(1)->data()->at(b)->key);
    auto* ticker = dynamic_cast<QCPAxisTickerText*>(view.plot()->xAxis->ticker().data());
    ASSERT_TRUE(ticker);
    EXPECT_EQ(ticker->ticks().value(2), "2-3");
    EXPECT_EQ(ticker->ticks().value(4), "8-15");
    EXPECT_GE(view.plot()->yAxis->range().upper, 0.67);
    // Drawn: the middle of pca's tallest bar in its blue, lle's short bar in its orange
    // (each brush half transparent over the white background).
    auto over_white = [](const QColor& c) {
        auto mix = [&](int v) { return (v * c.alpha() + 255 * (255 - c.alpha())) / 255; };
        return QColor(mix(c.red()), mix(c.green()), mix(c.blue()));
    };
    const auto tall = view.klBars(0)->data()->at(2);
    const QColor blue = drawn_at(view.plot(), tall->key, tall->value / 2);
    EXPECT_TRUE(near(blue, over_white(QColor(31, 119, 180, 170)), 3)) << blue.name().toStdString();
    const auto low = view.klBars(1)->data()->at(2);
    const QColor orange = drawn_at(view.plot(), low->key, low->value / 2);
    EXPECT_TRUE(near(orange, over_white(QColor(255, 127, 14, 170)), 3)) << orange.name().toStdString();
    EXPECT_TRUE(view.summary().contains("pca rank 13: mean KL 0.5600")) << view.summary().toStdString();

    // One run: its bars centred on the buckets, the second run's gone.
    auto one = d;
    one.runs.resize(1);
    view.setData(one);
    EXPECT_EQ(view.klBars(1), nullptr);
    EXPECT_DOUBLE_EQ(view.klBars(0)->data()->at(0)->key, 1.0);
}

TEST(TokenDamageView, ExportsEveryBucketAndRunAsCsv)
{
    TokenDamageView view;
    view.setData(two_runs());
    QTemporaryDir dir;
    const QString file = dir.filePath("damage.csv");
    ASSERT_EQ(view.exportCsv(file), "");
    QFile in(file);
    ASSERT_TRUE(in.open(QIODevice::ReadOnly | QIODevice::Text));
    const QStringList lines = QString::fromUtf8(in.readAll()).split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(lines.size(), 1 + 2 * 5);
    EXPECT_EQ(lines[0], "bucket,run,tokens,positions,mean_cosine,kl_as_target,kl_as_input");
    EXPECT_EQ(lines[1], "0,\"pca rank 13\",900,0,0.40000000000000002,,"); // no KL where no position
    EXPECT_EQ(lines[7].section(',', 0, 1), "1,\"lle keep 0.9\"");
    EXPECT_DOUBLE_EQ(lines[7].section(',', 5, 5).toDouble(), 0.13);
    EXPECT_NE(view.exportCsv(dir.filePath("missing/damage.csv")), "");
}

TEST(NeighbourGraphDamage, ColoursFollowTheValuesAndTheWorstTokenIsDrawnLast)
{
    // 400 tokens on a grid; token 7 (the worst) sits exactly on token 3 (nearly undamaged).
    NeighbourGraphData d;
    const int V = 400;
    QVector<double> values(V);
    for (int id = 0; id < V; ++id) {
        d.x << id % 20;
        d.y << id / 20;
        (id % 2 ? d.rare : d.common) << id;
        values[id] = std::fmod(id * 0.37, 1.0); // every rank, in no order
    }
    d.cosine = QVector<double>(d.rare.size(), 0.9);
    d.x[7] = d.x[3];
    d.y[7] = d.y[3];
    values[3] = 0.0;
    values[7] = 5.0;
    values[11] = NAN; // never a target
    NeighbourGraphView view;
    view.setData(d);
    embedlab::test::settle(view);
    view.setTokenValues(values, "KL as target");
    const auto& curves = view.valueCurves();
    ASSERT_EQ(curves.size(), 6);                    // no value, then five bands best first
    EXPECT_FALSE(view.plot()->graph(0)->visible()); // the cosine colouring is off
    ASSERT_EQ(curves[0]->data()->size(), 1);
    EXPECT_DOUBLE_EQ(curves[0]->data()->at(0)->key, d.x[11]);
    // Each band ascending, every band above the one before, colours from blue to red.
    double last = -1;
    int points = 0;
    for (int b = 1; b < curves.size(); ++b) {
        for (auto it = curves[b]->data()->constBegin(); it != curves[b]->data()->constEnd(); ++it) {
            const int id = static_cast<int>(it->value) * 20 + static_cast<int>(it->key);
            const double v = (it->key == d.x[3] && it->value == d.y[3]) ? (b == 1 ? 0.0 : 5.0) : values[id];
            EXPECT_GE(v, last) << "band " << b;
            last = v;
            ++points;
        }
    }
    EXPECT_EQ(points, V - 1);
    EXPECT_EQ(curves[1]->scatterStyle().pen().color(), QColor(31, 119, 180));
    EXPECT_EQ(curves.back()->scatterStyle().pen().color(), QColor(214, 39, 40));
    EXPECT_EQ(curves.back()->data()->size(), V - 1 - static_cast<int>(0.99 * (V - 1))); // the worst 1 %
    // The worst token is the last point drawn, and on screen it covers token 3.
    const auto worst = curves.back()->data()->at(curves.back()->data()->size() - 1);
    EXPECT_DOUBLE_EQ(worst->key, d.x[7]);
    EXPECT_DOUBLE_EQ(worst->value, d.y[7]);
    const QColor pixel = drawn_at(view.plot(), d.x[7], d.y[7]);
    EXPECT_TRUE(near(pixel, QColor(214, 39, 40))) << pixel.name().toStdString();
    EXPECT_TRUE(view.hoverText(QPointF(view.plot()->xAxis->coordToPixel(d.x[5]),
                                       view.plot()->yAxis->coordToPixel(d.y[5])))
                    .contains("KL as target"));

    // Reversed values: token 3 is now the worst, drawn over token 7.
    values[3] = 5.0;
    values[7] = 0.0;
    view.setTokenValues(values, "KL as target");
    EXPECT_TRUE(near(drawn_at(view.plot(), d.x[7], d.y[7]), QColor(214, 39, 40)));
    // Cleared: the cosine bands again, no value curves.
    view.setTokenValues({}, {});
    EXPECT_TRUE(view.valueCurves().isEmpty());
    EXPECT_TRUE(view.plot()->graph(0)->visible());
    // Values that do not fit the graph (another model's) colour nothing.
    view.setTokenValues(QVector<double>(V + 1, 1.0), "KL as target");
    EXPECT_TRUE(view.valueCurves().isEmpty());
}

namespace {

struct Workbench {
    MainWindow window;
    DamagePanel* panel = nullptr;

    void open(const std::string& model)
    {
        window.setAskBeforeDiscarding(false);
        bool shown = false;
        QObject::connect(&window, &MainWindow::modelShown, [&](bool ok) { shown = ok; });
        window.openModel(QString::fromStdString(model));
        ASSERT_TRUE(wait_for([&] { return shown && window.jobs().idle(); }));
        panel = window.findChild<DamagePanel*>();
        ASSERT_TRUE(panel);
        embedlab::test::settle(window);
    }
    void run(const embedlab::CompressionRequest& request)
    {
        ASSERT_GT(window.runCompression(request), 0);
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    }
    // The LLE tab shown (its graph computed), the damage of runs `first` and `second`.
    void damage(int first, int second)
    {
        ASSERT_TRUE(window.showView("lle"));
        ASSERT_TRUE(
            wait_for([&] { return window.jobs().idle() && !window.neighbourView()->data().x.isEmpty(); }));
        panel->chooseRuns(first, second);
        ASSERT_GT(panel->compute(), 0);
        // tinyllama's two runs over 4096 tokens take a minute or more on a busy machine.
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }, 600000));
    }
};

} // namespace

TEST(DamagePanel, MeasuresAResultsRowAsTheEngineDoesAndColoursTheGraph)
{
    Workbench w;
    const std::string model = embedlab::app::default_model();
    ASSERT_NO_FATAL_FAILURE(w.open(model));
    auto request = w.window.methodPanel()->request("pca");
    request.rank = 16;
    request.eval_tokens = 256; // seconds
    ASSERT_NO_FATAL_FAILURE(w.run(request));
    request.rank = 4;
    ASSERT_NO_FATAL_FAILURE(w.run(request));
    ASSERT_EQ(w.window.resultsView()->rows().size(), 2u);
    ASSERT_NO_FATAL_FAILURE(w.damage(0, 1));
    const auto& shown = w.panel->view()->data();
    ASSERT_EQ(shown.runs.size(), 2) << w.panel->status().toStdString();

    // The engine on its own: the same seeded fit, text and protocol.
    request.model = model;
    request.rank = 16;
    auto fit_only = request; // the fit is what matters here; the text is read below
    fit_only.eval_text.clear();
    const auto run = embedlab::run_compression(fit_only);
    const auto original = embedlab::load_model(model, embedlab::request_load_options(request));
    auto ids = original.tokenizer->encode(embedlab::read_text_file(request.eval_text));
    ids.resize(256);
    const auto d =
        embedlab::evaluate_divergence(run.compressed_model(), *original.model, ids,
                                      {.ctx = std::min<int64_t>(128, original.model->max_context())});
    const auto damage = embedlab::token_damage(run.compressed_model(), *original.model, d.positions);
    ASSERT_EQ(shown.buckets.size(), static_cast<qsizetype>(damage.buckets.size()));
    double tokens = 0;
    for (size_t b = 0; b < damage.buckets.size(); ++b) {
        SCOPED_TRACE(b);
        const auto& e = damage.buckets[b];
        EXPECT_EQ(shown.buckets[static_cast<int>(b)].toStdString(), e.label());
        EXPECT_NEAR(shown.runs[0].cosine[static_cast<int>(b)], e.mean_cosine, 1e-9);
        if (std::isnan(e.kl_as_target))
            EXPECT_TRUE(std::isnan(shown.runs[0].kl_as_target[static_cast<int>(b)]));
        else
            EXPECT_NEAR(shown.runs[0].kl_as_target[static_cast<int>(b)], e.kl_as_target, 1e-9);
        tokens += shown.runs[0].tokens[static_cast<int>(b)];
    }
    EXPECT_EQ(tokens, static_cast<double>(damage.cosine.size()));
    EXPECT_NEAR(shown.runs[0].kl_mean, d.kl_mean, 1e-9);
    EXPECT_GT(shown.runs[1].kl_mean, shown.runs[0].kl_mean); // rank 4 damages more than rank 16
    EXPECT_EQ(w.panel->view()->klBars(1)->data()->isEmpty(), false);

    // The graph: every token by its KL as target, the worst one drawn last.
    const auto& curves = w.window.neighbourView()->valueCurves();
    ASSERT_EQ(curves.size(), 6);
    const auto worst =
        std::max_element(damage.kl_as_target.begin(), damage.kl_as_target.end(), [](double a, double b) {
            return (std::isnan(a) ? -1 : a) < (std::isnan(b) ? -1 : b);
        });
    const auto id = static_cast<int>(worst - damage.kl_as_target.begin());
    const auto& graph = w.window.neighbourView()->data();
    const auto last = curves.back()->data()->at(curves.back()->data()->size() - 1);
    EXPECT_DOUBLE_EQ(last->key, graph.x[id]);
    EXPECT_DOUBLE_EQ(last->value, graph.y[id]);
    int never = 0;
    for (double v : damage.kl_as_target)
        never += std::isnan(v);
    EXPECT_EQ(curves[0]->data()->size(), never);
    // 1 - cosine colours every token: nothing without a value.
    w.panel->setColourBy(DamagePanel::OneMinusCosine);
    EXPECT_EQ(w.window.neighbourView()->valueCurves().at(0)->data()->size(), 0);
    w.panel->setColourBy(DamagePanel::LleCosine);
    EXPECT_TRUE(w.window.neighbourView()->valueCurves().isEmpty());
}

// DAMAGE_SCREENSHOT=FILE.png: tinyllama's pca k = 13 against lle r = 0.9 (k = 5) at
// about the same bytes (docs/evaluation.md), the LLE tab coloured by pca's damage.
TEST(DamagePanel, Screenshot)
{
    const QString file = qEnvironmentVariable("DAMAGE_SCREENSHOT");
    const auto checkout =
        std::filesystem::path(embedlab::app::default_model()).parent_path().parent_path().parent_path();
    const auto tinyllama = checkout / ".." / "shared" / "models" / "tinyllama";
    if (file.isEmpty() || !std::filesystem::exists(tinyllama))
        GTEST_SKIP() << "set DAMAGE_SCREENSHOT=FILE.png (needs ../shared/models/tinyllama)";
    Workbench w;
    ASSERT_NO_FATAL_FAILURE(w.open(std::filesystem::absolute(tinyllama).string()));
    auto pca = w.window.methodPanel()->request("pca");
    pca.rank = 13;
    ASSERT_NO_FATAL_FAILURE(w.run(pca));
    auto lle = w.window.methodPanel()->request("lle");
    lle.keep_ratio = 0.9;
    lle.k = 5;
    ASSERT_NO_FATAL_FAILURE(w.run(lle));
    ASSERT_NO_FATAL_FAILURE(w.damage(0, 1));
    w.window.resize(1600, 900);
    if (auto* pages = w.window.findChild<QTabWidget*>("neighbour_side_pages"))
        pages->setCurrentIndex(pages->count() - 1); // the Damage page, as the user left it
    QApplication::processEvents();
    EXPECT_TRUE(w.window.grab().save(file)) << w.panel->status().toStdString();
    EXPECT_EQ(w.panel->view()->exportCsv(QString(file).replace(".png", ".csv")), ""); // the numbers drawn
}

int main(int argc, char** argv)
{
    return embedlab::test::run_gui_tests(argc, argv, "test_damage");
}
