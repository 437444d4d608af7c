// Issue 61 item 6: encoders in the workbench, driven as a user does (keys, clicks). A
// masked-LM encoder's row has its pseudo-perplexity (as `embedlab-cli eval` scores it) and
// its masked-token KL, and the job says so; another encoder's PPL "–" says why and what
// applies instead, and so does a refused + KL vs original; the Compare tab compares an
// encoder's sentence embeddings instead of generating. Leftovers of the same issue: Ctrl+E
// on an empty Results plot says there is nothing to export, a reopened session's encoder
// rows keep the cosine axis, the Compare tab's worst list names its run, an exported row's
// folder is named by the run's settings.
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "compare_analyses.hpp"
#include "compare_view.hpp"
#include "embedlab/encoder.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/model.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "results_view.hpp"
#include "test_paths.hpp"
#include "workbench_support.hpp"

using embedlab::app::MainWindow;
using embedlab::app::MethodPanel;
using embedlab::test::open_shown;
using embedlab::test::press_key;
using embedlab::test::wait_for;

namespace {

QString encoder_model(const char* name)
{
    return QString(EMBEDLAB_SOURCE_DIR) + "/tests/data/encoders/" + name;
}

// A window as a new user meets it (no remembered panel choice), at a laptop's size.
struct EncoderWindow {
    EncoderWindow()
    {
        QSettings().clear();
        window = std::make_unique<MainWindow>();
        window->setAskBeforeDiscarding(false);
        window->resize(1366, 768);
        window->setAttribute(Qt::WA_DontShowOnScreen);
        window->show();
        QObject::connect(&window->jobs(), &embedlab::app::JobController::queued,
                         [this](int, const QString& name) { job_names << name; });
    }
    std::unique_ptr<MainWindow> window;
    QStringList job_names;
};

QSpinBox* evaluated_tokens_box(MethodPanel& panel)
{
    for (auto* box : panel.findChildren<QSpinBox*>())
        if (box->specialValueText() == "all tokens")
            return box;
    return nullptr;
}

// Types `text` into the box, then Return and Tab, as a user commits a number.
void enter_number(QSpinBox* box, const QString& text)
{
    embedlab::test::type_number(box, text);
    press_key(box, Qt::Key_Return);
    press_key(box, Qt::Key_Tab);
}

// The panel's method chosen as a user does: the method box, then Run clicked.
void choose_method(MethodPanel& panel, const QString& method)
{
    for (auto* box : panel.findChildren<QComboBox*>())
        for (int i = 0; i < box->count(); ++i)
            if (box->itemText(i) == method || box->itemData(i).toString() == method) {
                box->setCurrentIndex(i);
                return;
            }
    panel.setMethod(method);
}

QAction* encoder_menu_action(MainWindow& window, const QString& text)
{
    for (QAction* menu : window.menuBar()->actions())
        if (menu->menu())
            for (QAction* a : menu->menu()->actions())
                if (a->text().remove('&').startsWith(text))
                    return a;
    return nullptr;
}

void click_run(MainWindow& window)
{
    auto* run = window.methodPanel()->findChild<QPushButton*>("run");
    ASSERT_NE(run, nullptr);
    run->click();
}

QString cell_tooltip(const embedlab::views::ResultsView& view, const QString& method, int column)
{
    const auto* model = view.table()->model();
    for (int r = 0; r < model->rowCount(); ++r)
        if (model->index(r, 0).data().toString() == method)
            return model->index(r, column).data(Qt::ToolTipRole).toString();
    return {};
}

} // namespace

// A masked-LM encoder (distilbert-mlm): its row's PPL is the pseudo-perplexity that
// `eval` computes (every token masked in turn), the original's against the engine's own
// call on the same ids, the KL column filled by + KL vs original, the job named for what
// it computes, and the PPL cell saying what the number is.
TEST(EncoderWorkbench, AMaskedLmEncodersRowHasItsPseudoPerplexityAndMaskedTokenKl)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    open_shown(window, encoder_model("distilbert-mlm"));
    MethodPanel& panel = *window.methodPanel();
    EXPECT_EQ(panel.evaluation(), MethodPanel::Evaluation::PseudoPerplexity);
    EXPECT_TRUE(panel.evaluationText()->isEnabled());
    EXPECT_TRUE(panel.evaluationText()->toolTip().contains("pseudo-perplexity"));
    choose_method(panel, "pca");
    auto* tokens = evaluated_tokens_box(panel);
    ASSERT_NE(tokens, nullptr);
    enter_number(tokens, "300");
    panel.divergenceBox()->setFocus();
    press_key(panel.divergenceBox(), Qt::Key_Space); // ticks it
    ASSERT_TRUE(panel.divergenceBox()->isChecked());
    click_run(window);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u) << window.statusBar()->currentMessage().toStdString();
    ASSERT_FALSE(w.job_names.isEmpty());
    EXPECT_TRUE(w.job_names.last().endsWith("+ pseudo-perplexity, masked-token KL"))
        << w.job_names.last().toStdString();
    EXPECT_FALSE(w.job_names.last().contains("+ perplexity"));

    const auto& row = window.resultsView()->rows()[0];
    ASSERT_FALSE(row.eval_text.empty());
    // The reference: the engine's masked-LM entry on the original, the text's first 300 ids.
    const auto original = embedlab::load_model(encoder_model("distilbert-mlm").toStdString());
    auto ids = original.tokenizer->encode(embedlab::read_text_file(row.eval_text));
    ASSERT_GT(ids.size(), 300u);
    ids.resize(300);
    const auto reference = embedlab::evaluate_masked_lm(*original.model, *original.tokenizer, ids, {});
    EXPECT_NEAR(row.ppl_original, reference.pseudo_ppl, 1e-9 * reference.pseudo_ppl);
    EXPECT_EQ(row.eval_tokens, 300);
    EXPECT_TRUE(std::isfinite(row.ppl) && row.ppl > 1) << row.ppl;
    EXPECT_NEAR(row.delta_ln_ppl, std::log(row.ppl) - std::log(row.ppl_original), 1e-12);
    EXPECT_TRUE(std::isfinite(row.kl_mean) && row.kl_mean >= 0) << row.kl_mean;
    EXPECT_TRUE(cell_tooltip(*window.resultsView(), "pca", 4).contains("pseudo-perplexity"));
}

// An encoder without a masked-LM head (bert-cls, a classifier): "Evaluate on" is disabled
// and says why; + KL vs original is refused saying what applies instead; the run is named
// for what it computes, and its PPL "–" says why.
TEST(EncoderWorkbench, AnEncoderWithoutAMaskedLmHeadSaysWhatAppliesInsteadOfPerplexity)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    open_shown(window, encoder_model("bert-cls"));
    MethodPanel& panel = *window.methodPanel();
    EXPECT_EQ(panel.evaluation(), MethodPanel::Evaluation::None);
    EXPECT_FALSE(panel.evaluationText()->isEnabled())
        << "Evaluate on is offered for a model it cannot apply to";
    EXPECT_TRUE(panel.evaluationText()->toolTip().contains("no perplexity"));
    choose_method(panel, "pca");
    panel.divergenceBox()->setFocus();
    press_key(panel.divergenceBox(), Qt::Key_Space);
    ASSERT_TRUE(panel.divergenceBox()->isChecked());
    EXPECT_TRUE(panel.divergenceBox()->toolTip().contains("does not apply"));
    click_run(window);
    const QString refused = window.statusBar()->currentMessage();
    EXPECT_TRUE(refused.startsWith("Not run: bert-cls is an encoder without a masked-LM head"))
        << refused.toStdString();
    EXPECT_TRUE(refused.contains("Untick it") && refused.contains("cosine") &&
                refused.contains("Compare tab"))
        << refused.toStdString();
    EXPECT_FALSE(refused.contains("needs an evaluation")) << refused.toStdString();
    EXPECT_TRUE(w.job_names.filter("compress").isEmpty());

    press_key(panel.divergenceBox(), Qt::Key_Space); // unticks it
    ASSERT_FALSE(panel.divergenceBox()->isChecked());
    click_run(window);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u) << window.statusBar()->currentMessage().toStdString();
    const QStringList runs = w.job_names.filter("compress");
    ASSERT_EQ(runs.size(), 1);
    EXPECT_TRUE(runs[0].endsWith("+ table cosine (an encoder: no perplexity)")) << runs[0].toStdString();
    const auto& row = window.resultsView()->rows()[0];
    EXPECT_TRUE(std::isnan(row.ppl));
    EXPECT_GT(row.mean_cosine, 0.5);
    const QString why = cell_tooltip(*window.resultsView(), "pca", 4);
    EXPECT_TRUE(why.contains("without a masked-LM head") && why.contains("no perplexity") &&
                why.contains("cosine"))
        << why.toStdString();
    EXPECT_EQ(window.resultsView()->yMetric(), QString("1 − mean cosine"));
}

// The Compare tab on an encoder's run: no "has no tokenizer"; Generate and Colour by KL
// say it is an encoder and what applies; the Embeddings page lists, for each sentence, its
// cosine before/after and its nearest other sentences under both models, the original's
// as an independent cosine over the engine's embeddings gives them.
TEST(EncoderWorkbench, TheCompareTabComparesAnEncodersSentenceEmbeddings)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    const QString model = encoder_model("bert-cls");
    open_shown(window, model);
    choose_method(*window.methodPanel(), "pca");
    click_run(window);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u) << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(window.showView("compare"));
    auto* compare = window.findChild<embedlab::views::CompareView*>();
    ASSERT_NE(compare, nullptr);
    ASSERT_EQ(compare->runBox()->count(), 1);
    EXPECT_TRUE(compare->encoderChosen());
    EXPECT_EQ(compare->mode(), 2) << "an encoder's run opens on the Embeddings page";

    compare->showMode(0);
    compare->generateButton()->click();
    QApplication::processEvents();
    EXPECT_TRUE(compare->status()->text().contains("is an encoder: it cannot generate"))
        << compare->status()->text().toStdString();
    EXPECT_TRUE(compare->status()->text().contains("Embeddings page"));
    compare->showMode(1);
    compare->setInputText("A man is playing a guitar.");
    compare->measureButton()->click();
    QApplication::processEvents();
    EXPECT_TRUE(compare->status()->text().contains("Embeddings page"))
        << compare->status()->text().toStdString();
    EXPECT_FALSE(compare->status()->text().contains("tokenizer"));
    ASSERT_TRUE(window.jobs().idle()) << "a refused compare queued a job";

    compare->showMode(2);
    compare->setSentencesText("A man is playing a guitar.\nA woman is slicing an onion.\nSomeone plays an "
                              "instrument. A chef cuts vegetables.\nA cat sleeps on the sofa.");
    compare->embedButton()->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    QApplication::processEvents();
    auto* table = compare->embeddingTable();
    ASSERT_EQ(table->rowCount(), 5) << compare->status()->text().toStdString();
    const QString run = compare->runBox()->currentText();
    EXPECT_TRUE(compare->embeddingTitle()->text().contains(run.toHtmlEscaped()))
        << compare->embeddingTitle()->text().toStdString();
    EXPECT_EQ(compare->embeddingRun(), run);
    for (int i = 0; i < 5; ++i) {
        const double cosine = table->item(i, 1)->text().toDouble();
        EXPECT_GT(cosine, 0.5) << i;
        EXPECT_LE(cosine, 1.0001) << i;
    }
    // The original's nearest sentence, from the engine's embeddings and a cosine here.
    const std::vector<std::string> sentences =
        embedlab::app::split_sentences(compare->sentencesText().toStdString());
    ASSERT_EQ(sentences.size(), 5u);
    const auto original = embedlab::load_model(model.toStdString());
    const auto e = embedlab::embed_texts(*original.model, *original.tokenizer, sentences, {});
    const auto unit = e.values / e.values.norm(2, 1, true);
    const auto sims = unit.matmul(unit.t());
    for (int i = 0; i < 5; ++i) {
        int best = -1;
        double best_sim = -2;
        for (int j = 0; j < 5; ++j)
            if (j != i && sims[i][j].item<double>() > best_sim)
                best = j, best_sim = sims[i][j].item<double>();
        EXPECT_TRUE(table->item(i, 2)->text().startsWith(QString::fromStdString(sentences[best])))
            << i << ": " << table->item(i, 2)->text().toStdString();
    }
}

// Issue 61 leftover: Ctrl+E on the Results tab with no point says there is nothing to
// export, before any dialog (as Ctrl+D does).
TEST(EncoderWorkbench, CtrlEOnAnEmptyResultsPlotSaysThereIsNothingToExport)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    window.activateWindow();
    ASSERT_TRUE(window.showView("results"));
    bool dialog = false;
    QTimer::singleShot(0, [&] {
        if (auto* open = qobject_cast<QDialog*>(QApplication::activeModalWidget())) {
            dialog = true;
            open->reject();
        }
    });
    QAction* export_figure = encoder_menu_action(window, "Export figure");
    ASSERT_NE(export_figure, nullptr);
    EXPECT_EQ(export_figure->shortcut(), QKeySequence("Ctrl+E"));
    export_figure->trigger(); // what Ctrl+E does (MainWindow.ShortcutsWork... presses the keys)
    QApplication::processEvents();
    EXPECT_FALSE(dialog) << "a dialog opened for an empty plot";
    EXPECT_TRUE(window.statusBar()->currentMessage().contains("nothing to export"))
        << window.statusBar()->currentMessage().toStdString();
}

// A session saved with an encoder's rows beside a decoder's, reopened in a new window with
// the decoder loaded: choosing the encoder in the model filter draws its rows on 1 − mean
// cosine, and its PPL cells say why they are empty.
TEST(EncoderWorkbench, AReopenedSessionsEncoderRowsKeepTheCosineAxis)
{
    QTemporaryDir dir;
    const QString file = dir.filePath("session.embedlab.json");
    const QString encoder = encoder_model("minilm-st");
    {
        EncoderWindow w;
        MainWindow& window = *w.window;
        open_shown(window, encoder);
        choose_method(*window.methodPanel(), "pca");
        click_run(window);
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
        embedlab::test::open_bundled(window);
        enter_number(evaluated_tokens_box(*window.methodPanel()), "256");
        click_run(window);
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
        ASSERT_EQ(window.resultsView()->rows().size(), 2u);
        ASSERT_TRUE(window.saveSession(file));
    }
    EncoderWindow w;
    MainWindow& window = *w.window;
    ASSERT_TRUE(window.openSession(file));
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    QComboBox* filter = window.resultsView()->modelFilterBox();
    const int at = filter->findData(encoder);
    ASSERT_GE(at, 0);
    filter->setCurrentIndex(at);
    EXPECT_EQ(window.resultsView()->yMetric(), QString("1 − mean cosine"));
    EXPECT_TRUE(window.resultsView()->perplexityNote(encoder).contains("no perplexity"));
    filter->setCurrentIndex(filter->findData(QString::fromStdString(embedlab::app::default_model())));
    EXPECT_NE(window.resultsView()->yMetric(), QString("1 − mean cosine"))
        << "the decoder's rows keep theirs";
}

// The Compare tab's worst-20 list is headed by the run it was computed for.
TEST(EncoderWorkbench, TheWorstListNamesTheRunItWasComputedFor)
{
    embedlab::views::CompareView view;
    view.setRuns({"svd rank 32 (tinyllama)", "quant q8_0 (tinyllama)"}, 0);
    embedlab::views::CompareTextData data;
    data.run = "svd rank 32 (tinyllama)";
    for (int i = 0; i < 3; ++i)
        data.tokens.push_back({i, "t", "t", i == 0 ? qQNaN() : 0.1 * i, {}, {}});
    data.worst = {2, 1};
    view.setTextData(data, "3 tokens");
    QString header;
    for (auto* label : view.findChildren<QLabel*>())
        if (label->text().startsWith("Worst 20"))
            header = label->text();
    EXPECT_TRUE(header.contains("svd rank 32 (tinyllama)")) << header.toStdString();
    view.runBox()->setCurrentIndex(1); // another run: the list and its header are cleared
    for (auto* label : view.findChildren<QLabel*>())
        if (label->text().startsWith("Worst 20"))
            header = label->text();
    EXPECT_FALSE(header.contains("svd rank 32")) << header.toStdString();
}

// Export compressed model proposes a folder named by the row's settings as the registry
// describes them (a quant row was "…-quant0": the rank of a method that has none).
TEST(EncoderWorkbench, TheExportDialogNamesTheRowsSettings)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    embedlab::test::open_bundled(window);
    auto request = window.methodPanel()->request("quant");
    request.type = "q8_0";
    request.eval_tokens = 128;
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u);
    window.resultsView()->selectRow(0);
    QString proposed;
    QTimer::singleShot(0, [&] {
        if (auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget())) {
            if (auto* where = dialog->findChild<QLineEdit*>())
                proposed = where->text();
            dialog->reject();
        }
    });
    QAction* export_model = encoder_menu_action(window, "Export compressed model");
    ASSERT_NE(export_model, nullptr);
    export_model->trigger();
    QApplication::processEvents();
    EXPECT_TRUE(proposed.endsWith("-quant-q8_0")) << proposed.toStdString();
}

// Issue 61: the Results plot's y axis is 1 − mean cosine only while every shown row lacks
// a perplexity (an encoder without a masked-LM head); a masked-LM encoder's rows have
// their pseudo-perplexity and are drawn by their Δ ln PPL, as a decoder's are.
TEST(EncoderWorkbench, AMaskedLmEncodersRowsAreDrawnByTheirDeltaLnPpl)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    auto* results = window.resultsView();
    const QString masked_lm = encoder_model("distilbert-mlm");
    open_shown(window, masked_lm);
    EXPECT_EQ(results->yMetric(), QString("Δ ln PPL")) << "before its first row";
    auto request = window.methodPanel()->request("pca");
    request.rank = 16;
    request.eval_tokens = 64;
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 1u) << window.statusBar()->currentMessage().toStdString();
    const auto row = results->rows()[0];
    ASSERT_TRUE(std::isfinite(row.ppl) && std::isfinite(row.delta_ln_ppl)) << row.ppl;
    EXPECT_EQ(results->yMetric(), QString("Δ ln PPL"));
    QCPCurve* pca = results->series("pca");
    ASSERT_NE(pca, nullptr);
    ASSERT_EQ(pca->data()->size(), 1);
    EXPECT_DOUBLE_EQ(pca->data()->at(0)->value, results->ySymlog()
                                                    ? embedlab::views::ResultsView::symlogOf(row.delta_ln_ppl)
                                                    : row.delta_ln_ppl);

    // A classifier's rows (no head, no perplexity) are drawn by the cosine; back on the
    // masked-LM encoder's rows, Δ ln PPL again.
    open_shown(window, encoder_model("bert-cls"));
    auto cls = window.methodPanel()->request("pca");
    cls.rank = 16;
    ASSERT_GT(window.runCompression(cls), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 2u) << window.statusBar()->currentMessage().toStdString();
    ASSERT_EQ(results->modelFilter(), encoder_model("bert-cls"));
    EXPECT_EQ(results->yMetric(), QString("1 − mean cosine"));
    QComboBox* filter = results->modelFilterBox();
    filter->setCurrentIndex(filter->findData(masked_lm)); // as a user picks it
    EXPECT_EQ(results->yMetric(), QString("Δ ln PPL"));
}

// Issue 61: the Compare tab's Embeddings page is an encoder's: disabled, its tooltip
// saying why, while a decoder is loaded or a decoder's run is chosen; enabled (and shown)
// for an encoder's run.
TEST(EncoderWorkbench, TheEmbeddingsPageIsOnlyAnEncoders)
{
    EncoderWindow w;
    MainWindow& window = *w.window;
    auto* compare = window.findChild<embedlab::views::CompareView*>();
    ASSERT_NE(compare, nullptr);
    QTabWidget* modes = nullptr;
    for (auto* tabs : compare->findChildren<QTabWidget*>())
        if (tabs->count() == 3 && tabs->tabText(2) == "Embeddings")
            modes = tabs;
    ASSERT_NE(modes, nullptr);
    embedlab::test::open_bundled(window);
    const QString decoder = QFileInfo(QString::fromStdString(embedlab::app::default_model())).fileName();
    ASSERT_TRUE(window.showView("compare"));
    EXPECT_FALSE(modes->isTabEnabled(2)) << "a decoder loaded, no run yet";
    EXPECT_TRUE(modes->tabToolTip(2).startsWith(decoder + " is a decoder"))
        << modes->tabToolTip(2).toStdString();
    EXPECT_TRUE(modes->tabToolTip(2).contains("encoder's sentence embeddings"));

    auto request = window.methodPanel()->request("pca");
    request.rank = 16;
    request.eval_tokens = 64;
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    open_shown(window, encoder_model("bert-cls"));
    auto cls = window.methodPanel()->request("pca");
    cls.rank = 16;
    ASSERT_GT(window.runCompression(cls), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_TRUE(window.showView("results"));
    ASSERT_TRUE(window.showView("compare")); // as a user returns to it: its runs listed anew
    ASSERT_EQ(compare->runBox()->count(), 2) << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(compare->encoderChosen()) << "the latest run, the encoder's";
    EXPECT_TRUE(modes->isTabEnabled(2));
    EXPECT_EQ(modes->tabToolTip(2), "");
    EXPECT_EQ(compare->mode(), 2);

    compare->runBox()->setCurrentIndex(0); // the decoder's run, with an encoder loaded
    const QString run = compare->runBox()->currentText();
    EXPECT_FALSE(modes->isTabEnabled(2));
    EXPECT_TRUE(modes->tabToolTip(2).startsWith(run + " is a decoder")) << modes->tabToolTip(2).toStdString();
    EXPECT_NE(compare->mode(), 2) << "the disabled page gave way";
}
