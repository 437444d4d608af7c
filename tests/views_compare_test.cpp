// The Compare tab (issue 39 part 2): tokens drawn in both columns on the colours
// their KL maps to, hover read-outs of both top-5, the worst-20 list and its
// jump to the neighbour graph, Stop; on the view alone and in the workbench on
// the bundled model (its pca k = 16 against the original, generated here too).
//
// libtorch before Qt (its `slots` macro).
#include "embedlab/experiment.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/text_divergence.hpp"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMouseEvent>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextEdit>
#include <QTimer>
#include <QToolTip>
#include <cmath>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "compare_analyses.hpp"
#include "compare_view.hpp"
#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "model_summary.hpp"
#include "neighbour_graph_view.hpp"
#include "results_view.hpp"
#include "test_paths.hpp"
#include "token_text.hpp"

using embedlab::app::MainWindow;
using embedlab::views::CompareToken;
using embedlab::views::CompareView;

namespace {

using embedlab::test::wait_for;

// The background drawn under character `position` of a pane.
QColor background_at(QTextEdit* pane, int position)
{
    QTextCursor cursor(pane->document());
    cursor.setPosition(position + 1); // the format of the character before the cursor
    return cursor.charFormat().background().color();
}

bool near(const QColor& a, const QColor& b)
{
    return std::abs(a.red() - b.red()) <= 2 && std::abs(a.green() - b.green()) <= 2 &&
           std::abs(a.blue() - b.blue()) <= 2;
}

// The tooltip a hover over pane `p`'s token `i` shows.
QString hover(CompareView& view, CompareView::Pane p, int i)
{
    QToolTip::hideText();
    const QPoint at = view.tokenRect(p, i).center();
    QHelpEvent event(QEvent::ToolTip, at, view.pane(p)->viewport()->mapToGlobal(at));
    QApplication::sendEvent(view.pane(p)->viewport(), &event);
    return QToolTip::isVisible() ? QToolTip::text() : QString();
}

CompareToken token(int id, const QString& text, double kl)
{
    CompareToken t;
    t.id = id;
    t.text = text;
    t.piece = text;
    t.kl = kl;
    for (int j = 0; j < 5; ++j) {
        t.top.push_back({QString("c%1_%2").arg(id).arg(j), 0.4 / (j + 1)});
        t.original_top.push_back({QString("o%1_%2").arg(id).arg(j), 0.5 / (j + 1)});
    }
    return t;
}

void type_text(QWidget* widget, const QString& text)
{
    widget->setFocus();
    for (QChar c : text)
        embedlab::test::press_key(widget, c == ' ' ? Qt::Key_Space : Qt::Key_A, Qt::NoModifier, QString(c));
}

void click(QWidget* widget, const QPoint& at)
{
    QMouseEvent press(QEvent::MouseButtonPress, QPointF(at), widget->mapToGlobal(QPointF(at)), Qt::LeftButton,
                      Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(widget, &press);
    QMouseEvent release(QEvent::MouseButtonRelease, QPointF(at), widget->mapToGlobal(QPointF(at)),
                        Qt::LeftButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(widget, &release);
}

} // namespace

TEST(CompareView, KlMapsToPaleYellowRedAndNothingForNaN)
{
    EXPECT_FALSE(CompareView::klColour(std::nan("")).isValid());
    EXPECT_EQ(CompareView::klColour(0), QColor(247, 247, 247));
    EXPECT_EQ(CompareView::klColour(0.001), QColor(247, 247, 247));
    EXPECT_TRUE(near(CompareView::klColour(std::sqrt(0.001)), QColor(254, 224, 139))); // the middle: 0.0316
    EXPECT_EQ(CompareView::klColour(1), QColor(215, 48, 39));
    EXPECT_EQ(CompareView::klColour(50), QColor(215, 48, 39));
    // Redder (less green) as KL grows.
    EXPECT_GT(CompareView::klColour(0.01).green(), CompareView::klColour(0.1).green());
    EXPECT_GT(CompareView::klColour(0.1).green(), CompareView::klColour(0.5).green());
}

TEST(CompareView, TokensAreDrawnOnTheirKlColourAndHoverListsBothTop5)
{
    CompareView view;
    embedlab::test::settle(view);
    view.startGeneration("orig", "pca rank 16");
    EXPECT_FALSE(view.generateButton()->isEnabled());
    EXPECT_TRUE(view.stopButton()->isEnabled());
    const double kls[] = {0.0001, 0.02, 0.4, 3.0};
    for (int i = 0; i < 4; ++i) {
        view.appendToken(CompareView::Compressed, token(i, QString(" w%1").arg(i), kls[i]));
        view.appendToken(CompareView::Original, token(10 + i, QString(" o%1").arg(i), std::nan("")));
    }
    view.appendToken(CompareView::Compressed, token(9, "", 0.5)); // mid-character: nothing drawn yet
    view.finishGeneration("done");
    QApplication::processEvents();
    EXPECT_TRUE(view.generateButton()->isEnabled());
    EXPECT_FALSE(view.stopButton()->isEnabled());
    const QString prompt = view.prompt()->text();
    EXPECT_EQ(view.pane(CompareView::Compressed)->toPlainText(), prompt + " w0 w1 w2 w3");
    EXPECT_EQ(view.pane(CompareView::Original)->toPlainText(), prompt + " o0 o1 o2 o3");
    EXPECT_EQ(view.tokenPosition(CompareView::Compressed, 4), -1);
    for (int i = 0; i < 4; ++i) {
        const int at = view.tokenPosition(CompareView::Compressed, i);
        ASSERT_EQ(at, prompt.size() + 3 * i);
        EXPECT_EQ(background_at(view.pane(CompareView::Compressed), at), CompareView::klColour(kls[i])) << i;
        EXPECT_EQ(background_at(view.pane(CompareView::Compressed), at + 2), CompareView::klColour(kls[i]));
        // The original's column is not compared: no background.
        EXPECT_EQ(
            view.pane(CompareView::Original)->document()->findBlock(0).charFormat().background().style(),
            Qt::NoBrush);
        EXPECT_EQ(view.tokenAt(CompareView::Compressed, view.tokenRect(CompareView::Compressed, i).center()),
                  i);
    }
    EXPECT_EQ(view.tokenAt(CompareView::Compressed, view.tokenRect(CompareView::Compressed, 0).center() -
                                                        QPoint(view.fontMetrics().averageCharWidth() * 2, 0)),
              -1)
        << "the prompt is no token";
    const QString tip = hover(view, CompareView::Compressed, 2);
    ASSERT_FALSE(tip.isEmpty());
    for (int j = 0; j < 5; ++j) {
        EXPECT_TRUE(tip.contains(QString("c2_%1").arg(j))) << tip.toStdString();
        EXPECT_TRUE(tip.contains(QString("o2_%1").arg(j))) << tip.toStdString();
    }
    EXPECT_TRUE(tip.contains("40.0%") && tip.contains("50.0%") && tip.contains("8.00%")); // 0.4/5, as percent
    EXPECT_TRUE(tip.contains("0.4 nats"));
    EXPECT_LT(tip.indexOf("c2_0"), tip.indexOf("c2_1")); // best first
    EXPECT_TRUE(hover(view, CompareView::Original, 1).contains("o11_4"));
}

TEST(CompareView, WorstListKeepsItsOrderAndAClickAsksForTheToken)
{
    CompareView view;
    embedlab::test::settle(view);
    view.showMode(1);
    embedlab::views::CompareTextData data;
    for (int i = 0; i < 30; ++i)
        data.tokens.push_back(token(100 + i, QString("t%1 ").arg(i), i == 0 ? std::nan("") : 0.01 * i));
    data.worst = {29, 28, 5, 27};
    view.setTextData(data, "30 tokens");
    ASSERT_EQ(view.worstList()->count(), 4);
    const int expected[] = {29, 28, 5, 27};
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(view.worstList()->item(r)->data(Qt::UserRole).toInt(), 100 + expected[r]);
        EXPECT_TRUE(
            view.worstList()->item(r)->text().startsWith(QString("%1. t%2").arg(r + 1).arg(expected[r])));
    }
    EXPECT_EQ(background_at(view.pane(CompareView::Text), view.tokenPosition(CompareView::Text, 5)),
              CompareView::klColour(0.05));
    int chosen = -1;
    QObject::connect(&view, &CompareView::tokenChosen, [&](int id) { chosen = id; });
    QListWidget* list = view.worstList();
    click(list->viewport(), list->visualItemRect(list->item(2)).center());
    EXPECT_EQ(chosen, 105);
    // The text selects that token.
    EXPECT_EQ(view.pane(CompareView::Text)->textCursor().selectedText(), "t5 ");
}

TEST(CompareJump, ShowTokenSelectsARareTokenAlsoWhenTheGraphComesLater)
{
    embedlab::views::NeighbourGraphView view;
    EXPECT_FALSE(view.showToken(45)); // no graph yet: remembered
    view.setData(embedlab::test::spiral_neighbour_graph(60, 40, 3));
    EXPECT_EQ(view.selectedToken(), 45);
    EXPECT_FALSE(view.showToken(3)); // common
    EXPECT_EQ(view.selectedToken(), 45);
    EXPECT_TRUE(view.showToken(50));
    EXPECT_EQ(view.selectedToken(), 50);
}

// Issue 61 item 3: the text's colouring names its run; choosing another run clears it
// (and the generated columns), and a result for a run no longer chosen is not shown.
TEST(CompareView, ComputedViewsNameTheirRunAndAreClearedForAnother)
{
    CompareView view;
    view.setRuns({"pca rank 16 (m)", "svd rank 32 (m)"}, 1);
    embedlab::views::CompareTextData data;
    data.run = "svd rank 32 (m)";
    data.tokens = {token(5, "Once", qQNaN()), token(6, " upon", 0.2)};
    data.worst = {1};
    data.total_tokens = 2;
    view.showMode(1);
    view.setTextData(data, "2 tokens");
    EXPECT_EQ(view.status()->text(), "svd rank 32 (m): 2 tokens");
    EXPECT_EQ(view.worstList()->count(), 1);
    view.startGeneration("m", "svd rank 32 (m)");
    view.appendToken(CompareView::Compressed, token(7, " a", 0.1));
    view.finishGeneration("done");

    view.runBox()->setCurrentIndex(0);
    EXPECT_EQ(view.tokenCount(CompareView::Text), 0);
    EXPECT_EQ(view.worstList()->count(), 0);
    EXPECT_EQ(
        view.status()->text(),
        "The colouring was for svd rank 32 (m): press Colour by KL to read the text with pca rank 16 (m).");
    EXPECT_EQ(view.tokenCount(CompareView::Compressed), 0);
    EXPECT_TRUE(view.generatedRun().isEmpty());

    view.setTextData(data, "2 tokens"); // svd's, arriving late
    EXPECT_EQ(view.tokenCount(CompareView::Text), 0);
    EXPECT_TRUE(view.status()->text().startsWith("Not shown")) << view.status()->text().toStdString();
    // Listed again (a return to the tab) with the same run chosen: nothing is cleared.
    data.run = "pca rank 16 (m)";
    view.setTextData(data, "2 tokens");
    view.setRuns({"pca rank 16 (m)", "svd rank 32 (m)"}, 0);
    EXPECT_EQ(view.tokenCount(CompareView::Text), 2);
    EXPECT_EQ(view.textRun(), "pca rank 16 (m)");
}

// Issue 61 item 3: a worst token of a run that is not LLE's is ringed on the map, and the
// rare/common split is said to be LLE's, not called "not a rare token".
TEST(CompareJump, AnotherMethodsCommonTokenIsRingedWithoutLlesVerdict)
{
    embedlab::views::NeighbourGraphView view;
    view.setData(embedlab::test::spiral_neighbour_graph(60, 40, 3));
    auto* stats = view.findChild<QLabel*>("neighbour_stats");
    ASSERT_NE(stats, nullptr);
    EXPECT_FALSE(view.showToken(3));
    EXPECT_TRUE(stats->text().contains("is not a rare token")) << "an LLE run's common token";
    EXPECT_FALSE(view.showToken(3, "svd rank 32 (m)"));
    EXPECT_FALSE(stats->text().contains("not a rare token")) << stats->text().toStdString();
    EXPECT_TRUE(stats->text().contains("svd rank 32 (m)")) << stats->text().toStdString();
    EXPECT_TRUE(view.showToken(50, "svd rank 32 (m)")) << "a rare token: its neighbours";
    EXPECT_EQ(view.selectedToken(), 50);
}

namespace {

struct Workbench {
    MainWindow window;
    CompareView* view = nullptr;
    std::string model = embedlab::app::default_model();

    void open()
    {
        window.setAskBeforeDiscarding(false);
        bool shown = false;
        QObject::connect(&window, &MainWindow::modelShown, [&](bool ok) { shown = ok; });
        window.openModel(QString::fromStdString(model));
        ASSERT_TRUE(wait_for([&] { return shown && window.jobs().idle(); }));
        ASSERT_GT(window.runCompression("pca", 16, 0), 0);
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
        ASSERT_EQ(window.resultsView()->rows().size(), 1u);
        view = window.findChild<CompareView*>();
        ASSERT_TRUE(view);
        embedlab::test::settle(window);
        ASSERT_TRUE(window.showView("compare"));
    }
};

// The bundled model's pca k = 16 fitted again here (seeded: the same model).
embedlab::CompressionRun pca16(const std::string& model)
{
    embedlab::CompressionRequest r;
    r.model = model;
    r.method = "pca";
    r.rank = 16;
    return embedlab::run_compression(r);
}

} // namespace

TEST(CompareTab, GeneratesBothColumnsWithTheEnginesKlColoursAndStops)
{
    Workbench w;
    ASSERT_NO_FATAL_FAILURE(w.open());
    CompareView& view = *w.view;
    ASSERT_EQ(view.runBox()->count(), 1);
    EXPECT_TRUE(view.runBox()->currentText().startsWith("pca rank 16"));
    view.prompt()->clear();
    type_text(view.prompt(), "Once upon a time");
    embedlab::test::type_number(view.maxTokens(), "12");
    ASSERT_EQ(view.maxTokens()->value(), 12);
    embedlab::test::press_key(view.prompt(), Qt::Key_Return); // Return generates
    EXPECT_TRUE(view.generating());
    ASSERT_TRUE(wait_for([&] { return w.window.jobs().idle(); }));
    EXPECT_FALSE(view.generating());
    EXPECT_TRUE(view.status()->text().contains("mean KL")) << view.status()->text().toStdString();

    // The same continuations and KLs from the engine directly, the original read as
    // embedlab-cli generate reads it (its f16 matrices as stored).
    auto original = embedlab::load_model_for_generation(w.model, {}, embedlab::GenerationWeights::Half);
    const auto run = pca16(w.model);
    const auto ids = embedlab::prompt_ids(*original.tokenizer, "Once upon a time");
    embedlab::GenerationOptions options;
    options.max_tokens = 12;
    const auto g = embedlab::generate(run.compressed_model(), original.tokenizer.get(), ids, options, {},
                                      original.model.get());
    const auto o = embedlab::generate(*original.model, original.tokenizer.get(), ids, options);
    ASSERT_EQ(g.tokens.size(), 12u) << "no end of text this early";
    ASSERT_EQ(view.tokenCount(CompareView::Compressed), 12);
    ASSERT_EQ(view.tokenCount(CompareView::Original), static_cast<int>(o.tokens.size()));
    double kl_max = 0;
    for (size_t i = 0; i < o.tokens.size(); ++i)
        EXPECT_EQ(view.token(CompareView::Original, static_cast<int>(i)).id, o.tokens[i].id) << i;
    for (int i = 0; i < 12; ++i) {
        const auto& t = view.token(CompareView::Compressed, i);
        EXPECT_EQ(t.id, g.tokens[i].id) << i;
        EXPECT_NEAR(t.kl, g.tokens[i].kl, 1e-6 * (1 + g.tokens[i].kl));
        kl_max = std::max(kl_max, g.tokens[i].kl);
        if (const int at = view.tokenPosition(CompareView::Compressed, i); at >= 0) {
            EXPECT_TRUE(near(background_at(view.pane(CompareView::Compressed), at),
                             CompareView::klColour(g.tokens[i].kl)))
                << i;
        }
    }
    EXPECT_GT(kl_max, 0.001) << "a rank-16 of 128 table moves some prediction";
    // Hover: both models' top-5, the engine's pieces and probabilities.
    const int shown = view.tokenPosition(CompareView::Compressed, 0) >= 0 ? 0 : 1;
    const QString tip = hover(view, CompareView::Compressed, shown);
    ASSERT_FALSE(tip.isEmpty());
    for (int j = 0; j < 5; ++j) {
        for (const auto* top : {&g.tokens[shown].top, &g.tokens[shown].reference_top})
            EXPECT_TRUE(tip.contains(embedlab::views::escaped_token(
                                         QString::fromStdString(original.tokenizer->token_text((*top)[j].id)))
                                         .toHtmlEscaped()))
                << j << tip.toStdString();
    }

    // Clicked Generate, stopped while it streams.
    embedlab::test::type_number(view.maxTokens(), "1000");
    view.generateButton()->click();
    ASSERT_TRUE(wait_for([&] { return view.tokenCount(CompareView::Compressed) > 0; }));
    view.stopButton()->click();
    ASSERT_TRUE(wait_for([&] { return w.window.jobs().idle(); }));
    EXPECT_FALSE(view.generating());
    EXPECT_EQ(view.status()->text(), "Stopped.");
    EXPECT_LT(view.tokenCount(CompareView::Compressed), 200) << "the context allows about 250";
    EXPECT_TRUE(view.generateButton()->isEnabled());
}

namespace {

// embedlab-cli generate MODEL --prompt PROMPT --max-tokens N --json [EXTRA], parsed.
nlohmann::json cli_generation(const std::string& model, const std::string& prompt, int max_tokens,
                              const std::string& extra = "")
{
    std::string command = EMBEDLAB_CLI_PATH;
    command += " generate '";
    command += model;
    command += "' --prompt '";
    command += prompt;
    command += "' --max-tokens ";
    command += std::to_string(max_tokens);
    command += " --json ";
    command += extra;
    std::string out;
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char buffer[4096];
        for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
            out.append(buffer, n);
        EXPECT_EQ(pclose(pipe), 0) << command;
    }
    return nlohmann::json::parse(out);
}

} // namespace

// Issue 63: the Compare tab generates the original from its f16 matrices as stored, as
// embedlab-cli generate does by default: the CLI's tokens and top-5 probabilities (the
// float32 path's differ from them in the last digits).
TEST(CompareTab, GeneratesTheOriginalFromHalfWeightsAsTheCliDoes)
{
    const std::string model = embedlab::app::default_model();
    embedlab::CompressionRequest request;
    request.model = model;
    request.method = "pca";
    request.rank = 16;
    embedlab::app::CompareGenerationOptions options;
    options.prompt = "Once upon a time";
    options.max_tokens = 16;
    std::vector<embedlab::app::ComparedToken> original;
    std::mutex mutex;
    embedlab::app::compare_generate(
        request, options,
        [&](embedlab::app::CompareColumn column, const embedlab::app::ComparedToken& t) {
            std::lock_guard lock(mutex);
            if (column == embedlab::app::CompareColumn::Original)
                original.push_back(t);
        },
        {});
    const auto half = cli_generation(model, options.prompt, 16);
    const auto f32 = cli_generation(model, options.prompt, 16, "--weights f32");
    ASSERT_EQ(original.size(), half["tokens"].size());
    ASSERT_EQ(half["ids"], f32["ids"]) << "greedy tokens do not depend on the weights' precision";
    double half_vs_f32 = 0;
    for (size_t i = 0; i < original.size(); ++i) {
        const auto& cli = half["tokens"][i];
        EXPECT_EQ(original[i].id, cli["id"].get<int>()) << i;
        ASSERT_EQ(original[i].top.size(), cli["top"].size()) << i;
        for (size_t j = 0; j < original[i].top.size(); ++j) {
            const double p = cli["top"][j]["p"].get<double>();
            EXPECT_NEAR(original[i].top[j].probability, p, 1e-12) << i << " " << j;
            half_vs_f32 = std::max(half_vs_f32, std::abs(p - f32["tokens"][i]["top"][j]["p"].get<double>()));
        }
    }
    EXPECT_GT(half_vs_f32, 1e-12) << "the two paths' sums differ in order: this test tells them apart";
}

TEST(CompareTab, TextModeListsTheWorstTwentyAndJumpsToTheNeighbourGraph)
{
    Workbench w;
    ASSERT_NO_FATAL_FAILURE(w.open());
    CompareView& view = *w.view;
    // The neighbour graph first, so a rare token among the worst can be chosen.
    ASSERT_TRUE(w.window.showView("lle"));
    ASSERT_TRUE(
        wait_for([&] { return w.window.jobs().idle() && !w.window.neighbourView()->data().x.isEmpty(); }));
    ASSERT_TRUE(w.window.showView("compare"));
    view.showMode(1);
    QFile sample(QString::fromStdString(embedlab::app::default_sample_text()));
    ASSERT_TRUE(sample.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(sample.read(1200));
    view.setInputText(text);
    view.measureButton()->click();
    ASSERT_TRUE(wait_for([&] { return w.window.jobs().idle(); }));
    QListWidget* list = view.worstList();
    ASSERT_EQ(list->count(), 20) << view.status()->text().toStdString();

    auto original = embedlab::load_model(w.model);
    const auto run = pca16(w.model);
    const auto ids = original.tokenizer->encode(text.toStdString());
    const auto d =
        embedlab::text_divergence(run.compressed_model(), *original.model, original.tokenizer.get(), ids);
    ASSERT_EQ(view.tokenCount(CompareView::Text), static_cast<int>(ids.size()));
    for (int r = 0; r < 20; ++r) {
        const int at = static_cast<int>(d.worst[r]);
        EXPECT_EQ(list->item(r)->data(Qt::UserRole + 1).toInt(), at) << r;
        EXPECT_EQ(list->item(r)->data(Qt::UserRole).toInt(), ids[at]);
        if (r > 0) {
            EXPECT_GE(view.token(CompareView::Text, list->item(r - 1)->data(Qt::UserRole + 1).toInt()).kl,
                      view.token(CompareView::Text, at).kl);
        }
        if (const int p = view.tokenPosition(CompareView::Text, at); p >= 0) {
            EXPECT_TRUE(
                near(background_at(view.pane(CompareView::Text), p), CompareView::klColour(d.kl[at])));
        }
    }
    // Click the worst rare token (LLE's rare tokens are most of a 50k vocabulary).
    const auto& rare = w.window.neighbourView()->data().rare;
    int row = -1;
    for (int r = 0; r < 20 && row < 0; ++r)
        if (rare.contains(list->item(r)->data(Qt::UserRole).toInt()))
            row = r;
    ASSERT_GE(row, 0);
    const int id = list->item(row)->data(Qt::UserRole).toInt();
    click(list->viewport(), list->visualItemRect(list->item(row)).center());
    EXPECT_TRUE(w.window.findChild<QTabWidget*>()->currentWidget()->isAncestorOf(w.window.neighbourView()));
    EXPECT_EQ(w.window.neighbourView()->selectedToken(), id);
}

// Not a check: the tab on tinyllama pca k = 16, saved for a reader (COMPARE_SCREENSHOT=FILE).
TEST(CompareTab, Screenshot)
{
    const QString file = qEnvironmentVariable("COMPARE_SCREENSHOT");
    // ../shared beside the checkout (the bundled model is in its resources/models).
    const auto checkout =
        std::filesystem::path(embedlab::app::default_model()).parent_path().parent_path().parent_path();
    const auto tinyllama = checkout / ".." / "shared" / "models" / "tinyllama";
    if (file.isEmpty() || !std::filesystem::exists(tinyllama))
        GTEST_SKIP() << "set COMPARE_SCREENSHOT=FILE.png (needs ../shared/models/tinyllama)";
    Workbench w;
    w.model = std::filesystem::absolute(tinyllama).string();
    ASSERT_NO_FATAL_FAILURE(w.open());
    w.view->prompt()->setText("Once upon a time, there was a little girl named Lily. She");
    w.view->maxTokens()->setValue(60);
    w.view->generateButton()->click();
    ASSERT_TRUE(wait_for([&] { return w.window.jobs().idle(); }));
    w.window.resize(1400, 900);
    QApplication::processEvents();
    const QPoint at = w.view->tokenRect(CompareView::Compressed, 8).center();
    QHelpEvent event(QEvent::ToolTip, at, w.view->pane(CompareView::Compressed)->viewport()->mapToGlobal(at));
    QApplication::sendEvent(w.view->pane(CompareView::Compressed)->viewport(), &event);
    EXPECT_TRUE(w.window.grab().save(file));
    w.view->showMode(1);
    QFile sample(QString::fromStdString(embedlab::app::default_sample_text()));
    ASSERT_TRUE(sample.open(QIODevice::ReadOnly));
    w.view->setInputText(QString::fromUtf8(sample.read(3000)));
    w.view->measureButton()->click();
    ASSERT_TRUE(wait_for([&] { return w.window.jobs().idle(); }));
    QApplication::processEvents();
    EXPECT_TRUE(w.window.grab().save(QString(file).replace(".png", "-text.png")));
}

int main(int argc, char** argv)
{
    return embedlab::test::run_gui_tests(argc, argv, "test_compare");
}
