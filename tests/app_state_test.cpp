// Issue 61 items 3, 4 and 7: state that never lies. Every computed view on the Compare
// tab and the Damage page names the run it was computed for and is cleared when another
// run is chosen; a model load resets what belongs to the model (the Results filter and y
// axis, the damage plot and its colour-by) and keeps the session's rows; the status bar
// drops stale messages, the Tensor-Train tab says it is computing, an export with nothing
// to export says so before any dialog, and export dialogs propose the model's and tab's
// name in the folder last used.
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "compare_view.hpp"
#include "damage_tab.hpp"
#include "jobs_dock.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "model_summary.hpp"
#include "neighbour_graph_view.hpp"
#include "results_view.hpp"
#include "tensor_train_view.hpp"
#include "test_paths.hpp"
#include "token_damage_view.hpp"
#include "workbench_support.hpp"

using embedlab::app::MainWindow;
using embedlab::test::open_bundled;
using embedlab::test::open_shown;
using embedlab::test::wait_for;

namespace {

QString stories260k()
{
    return QString(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf";
}

QString minilm_encoder()
{
    return QString(EMBEDLAB_SOURCE_DIR) + "/tests/data/encoders/minilm-st";
}

// A window as a new user meets it: no settings left by the program's earlier tests (a
// remembered run target or evaluation text would change what runs).
struct FreshWindow {
    FreshWindow() { QSettings().clear(); }
};

// Runs `method` at `rank` on the shown model and waits for its row.
void run_and_wait(MainWindow& window, const char* method, int rank)
{
    const size_t rows = window.resultsView()->rows().size();
    ASSERT_GT(window.runCompression(method, rank, 0), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), rows + 1)
        << window.statusBar()->currentMessage().toStdString();
}

// The results row (index) of `method` on `model`.
int row_of(const MainWindow& window, const std::string& method, const QString& model)
{
    const auto& rows = window.resultsView()->rows();
    for (int i = 0; i < static_cast<int>(rows.size()); ++i)
        if (rows[i].method == method && QString::fromStdString(rows[i].model) == model)
            return i;
    return -1;
}

// The file dialogs a call opens, each answered by `answer` (it accepts or rejects).
struct FileDialogWatch {
    QStringList proposed; // each dialog's proposed file, as shown
    std::function<void(QFileDialog*)> answer = [](QFileDialog* d) { d->reject(); };
    QTimer timer;
    FileDialogWatch()
    {
        QObject::connect(&timer, &QTimer::timeout, [this] {
            auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
            if (!dialog || !dialog->isVisible())
                return;
            const QStringList files = dialog->selectedFiles();
            proposed << (files.isEmpty() ? QString() : files.front());
            answer(dialog);
        });
        timer.start(20);
    }
};

// Ctrl+D as a user presses it: the shortcut map needs the window active.
void press_ctrl_d(MainWindow& window)
{
    window.activateWindow();
    ASSERT_TRUE(wait_for([&] { return window.isActiveWindow(); }, 2000));
    auto* tabs = window.findChild<QTabWidget*>();
    tabs->setFocus();
    embedlab::test::press_key(tabs, Qt::Key_D, Qt::ControlModifier);
    QApplication::processEvents();
}

} // namespace

// Item 3: the Text page's colouring and worst-20 list name their run; choosing another run
// on the Results tab and returning clears them (old code: the box switched, the numbers
// of the first run stayed under the second's name).
TEST(StateNeverLies, CompareTextNamesItsRunAndIsClearedWhenTheResultsSelectionChanges)
{
    FreshWindow fresh;
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    const QString model = QString::fromStdString(embedlab::app::default_model());
    run_and_wait(window, "pca", 16);
    run_and_wait(window, "svd", 8);
    embedlab::test::settle(window);
    auto* view = window.findChild<embedlab::views::CompareView*>();
    ASSERT_NE(view, nullptr);
    ASSERT_TRUE(window.showView("compare"));
    ASSERT_TRUE(view->runBox()->currentText().startsWith("svd")) << "the latest run";
    const QString svd = view->runBox()->currentText();
    view->showMode(1);
    QFile sample(QString::fromStdString(embedlab::app::default_sample_text()));
    ASSERT_TRUE(sample.open(QIODevice::ReadOnly));
    view->setInputText(QString::fromUtf8(sample.read(600)));
    view->measureButton()->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(view->worstList()->count(), 20);
    EXPECT_EQ(view->textRun(), svd);
    EXPECT_TRUE(view->status()->text().startsWith(svd + ": ")) << view->status()->text().toStdString();

    // Back and forth without choosing anything: the run and its colouring stay.
    ASSERT_TRUE(window.showView("results"));
    ASSERT_TRUE(window.showView("compare"));
    EXPECT_EQ(view->runBox()->currentText(), svd);
    EXPECT_EQ(view->worstList()->count(), 20);

    // The pca row chosen on the Results tab: the box follows it, the svd numbers go.
    ASSERT_TRUE(window.showView("results"));
    window.resultsView()->selectRow(row_of(window, "pca", model));
    ASSERT_TRUE(window.showView("compare"));
    const QString pca = view->runBox()->currentText();
    ASSERT_TRUE(pca.startsWith("pca")) << pca.toStdString();
    EXPECT_EQ(view->worstList()->count(), 0);
    EXPECT_EQ(view->tokenCount(embedlab::views::CompareView::Text), 0);
    EXPECT_TRUE(view->textRun().isEmpty());
    const QString said = view->status()->text();
    EXPECT_TRUE(said.contains(svd) && said.contains(pca)) << said.toStdString();

    // Measured for pca, the worst token of a run that is not LLE's is located on the
    // map, not called "not a rare token" (LLE's split).
    ASSERT_TRUE(window.showView("lle"));
    ASSERT_TRUE(
        wait_for([&] { return window.jobs().idle() && !window.neighbourView()->data().x.isEmpty(); }));
    ASSERT_TRUE(window.showView("compare"));
    view->measureButton()->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(view->textRun(), pca);
    const auto& rare = window.neighbourView()->data().rare;
    int common_row = -1;
    for (int r = 0; r < view->worstList()->count() && common_row < 0; ++r)
        if (!rare.contains(view->worstList()->item(r)->data(Qt::UserRole).toInt()))
            common_row = r;
    ASSERT_GE(common_row, 0) << "a common token among the worst 20";
    emit view->worstList()->itemClicked(view->worstList()->item(common_row));
    auto* stats = window.neighbourView()->findChild<QLabel*>("neighbour_stats");
    ASSERT_NE(stats, nullptr);
    EXPECT_FALSE(stats->text().contains("is not a rare token")) << stats->text().toStdString();
    EXPECT_TRUE(stats->text().contains(pca)) << stats->text().toStdString();
}

// Items 3 and 4: the Damage page offers the loaded model's run, clears a plot once its run
// is not chosen, and a model load resets its plot and colour-by; the Results filter and y
// axis follow the loaded model, and an encoder's cosine axis is not forced on other
// models' rows.
TEST(StateNeverLies, AModelLoadResetsTheModelsViewsAndKeepsTheSessionsRows)
{
    FreshWindow fresh;
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    const QString bundled = QString::fromStdString(embedlab::app::default_model());
    run_and_wait(window, "pca", 16);
    auto* damage = window.findChild<embedlab::app::DamagePanel*>();
    ASSERT_NE(damage, nullptr);
    ASSERT_TRUE(window.showView("lle"));
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_GT(damage->compute(), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_FALSE(damage->view()->data().runs.isEmpty());
    EXPECT_EQ(damage->colourBox()->currentIndex(), embedlab::app::DamagePanel::KlAsTarget);

    open_shown(window, stories260k());
    EXPECT_TRUE(damage->view()->data().runs.isEmpty()) << "the previous model's damage";
    EXPECT_EQ(damage->colourBox()->currentIndex(), embedlab::app::DamagePanel::LleCosine);
    EXPECT_EQ(damage->runBox()->currentIndex(), -1) << "no run of stories260K yet";
    EXPECT_TRUE(damage->status().contains("stories260K")) << damage->status().toStdString();
    run_and_wait(window, "pca", 8);
    EXPECT_EQ(window.resultsView()->modelFilter(), stories260k());
    ASSERT_TRUE(window.showView("results"));
    ASSERT_TRUE(window.showView("lle"));
    EXPECT_TRUE(damage->runBox()->currentText().contains("stories260K")) << "the loaded model's run";

    // Back to the first model: its rows shown (old code: stories260K's filter hid them).
    open_shown(window, bundled);
    EXPECT_EQ(window.resultsView()->modelFilter(), bundled);
    EXPECT_EQ(window.resultsView()->rows().size(), 2u) << "the session's rows are kept";
    ASSERT_TRUE(window.showView("results"));
    ASSERT_TRUE(window.showView("lle"));
    EXPECT_TRUE(damage->runBox()->currentText().startsWith("pca rank 16"))
        << damage->runBox()->currentText().toStdString();

    // An encoder loaded: other models' rows keep their axis until its own rows are shown.
    const QString y = window.resultsView()->yMetric();
    ASSERT_NE(y, "1 − mean cosine");
    open_shown(window, minilm_encoder());
    EXPECT_EQ(window.resultsView()->yMetric(), y) << "no encoder row shown yet";
    run_and_wait(window, "pca", 8);
    EXPECT_EQ(window.resultsView()->modelFilter(), minilm_encoder());
    EXPECT_EQ(window.resultsView()->yMetric(), "1 − mean cosine");
    open_shown(window, bundled);
    EXPECT_EQ(window.resultsView()->modelFilter(), bundled);
    EXPECT_EQ(window.resultsView()->yMetric(), y);
}

// Item 7: a refusal's message goes once the update runs; a tab's message is not left on
// another tab; the Tensor-Train tab says it is computing while it is.
TEST(StateNeverLies, StaleStatusMessagesAreClearedAndTensorTrainSaysComputing)
{
    FreshWindow fresh;
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    embedlab::test::settle(window);
    ASSERT_TRUE(window.showView("fourier"));
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    auto* first = window.findChild<QSpinBox*>("fourier_first");
    ASSERT_NE(first, nullptr);
    embedlab::test::type_number(first, "4000000");
    QPushButton* update = nullptr;
    for (auto* b : window.findChildren<QPushButton*>())
        if (b->text() == "Update" && first->parentWidget()->isAncestorOf(b))
            update = b;
    ASSERT_NE(update, nullptr);
    update->click();
    EXPECT_TRUE(window.statusBar()->currentMessage().startsWith("Not run: "))
        << window.statusBar()->currentMessage().toStdString();
    embedlab::test::type_number(first, "10");
    update->click();
    EXPECT_TRUE(window.statusBar()->currentMessage().isEmpty())
        << window.statusBar()->currentMessage().toStdString();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));

    // Said on the Fourier tab, gone on the Results tab.
    embedlab::test::type_number(first, "4000000");
    update->click();
    ASSERT_FALSE(window.statusBar()->currentMessage().isEmpty());
    ASSERT_TRUE(window.showView("results"));
    EXPECT_TRUE(window.statusBar()->currentMessage().isEmpty())
        << window.statusBar()->currentMessage().toStdString();

    ASSERT_TRUE(window.showView("tt"));
    EXPECT_TRUE(window.tensorTrainView()->summary().contains("computing"))
        << window.tensorTrainView()->summary().toStdString();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_FALSE(window.tensorTrainView()->summary().contains("computing"));
    EXPECT_GE(window.tensorTrainView()->selected(), 0);
}

// Item 7: Export data (Ctrl+D) on a tab with nothing to export says so before any dialog;
// the dialog proposes "<model>-<tab>.csv" and, next time, the folder last written to.
TEST(StateNeverLies, ExportsSayNothingToExportFirstAndProposeModelTabNamesInTheLastFolder)
{
    FreshWindow fresh;
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    window.resize(1366, 700);
    window.show(); // shown on the (offscreen) screen: a shortcut needs the window active
    const QString model_name =
        QFileInfo(QString::fromStdString(embedlab::app::default_model())).completeBaseName();
    {
        FileDialogWatch watch;
        ASSERT_TRUE(window.showView("compare"));
        press_ctrl_d(window);
        EXPECT_TRUE(watch.proposed.isEmpty()) << "no save dialog for nothing";
        EXPECT_TRUE(window.statusBar()->currentMessage().contains("Compare tab has no figure to export"))
            << window.statusBar()->currentMessage().toStdString();
        ASSERT_TRUE(window.showView("results"));
        press_ctrl_d(window);
        EXPECT_TRUE(watch.proposed.isEmpty()) << "no rows: an empty Pareto plot";
        EXPECT_TRUE(window.statusBar()->currentMessage().contains("nothing to export"))
            << window.statusBar()->currentMessage().toStdString();
    }
    run_and_wait(window, "pca", 16);
    QTemporaryDir folder;
    const QString written = QDir(folder.path()).filePath("pareto.csv");
    {
        FileDialogWatch watch;
        watch.answer = [&](QFileDialog* d) {
            auto* name = d->findChild<QLineEdit*>("fileNameEdit"); // typed, as a user does
            ASSERT_NE(name, nullptr);
            name->setText(written);
            static_cast<QDialog*>(d)->accept(); // QFileDialog's own is protected
        };
        press_ctrl_d(window);
        ASSERT_EQ(watch.proposed.size(), 1);
        EXPECT_TRUE(watch.proposed[0].endsWith("/" + model_name + "-results.csv"))
            << watch.proposed[0].toStdString();
        EXPECT_TRUE(QFile::exists(written)) << window.statusBar()->currentMessage().toStdString();
    }
    {
        FileDialogWatch watch;
        press_ctrl_d(window);
        ASSERT_EQ(watch.proposed.size(), 1);
        EXPECT_EQ(watch.proposed[0], QDir(folder.path()).filePath(model_name + "-results.csv"));
    }
    EXPECT_EQ(window.proposedExportFile("pdf"), QDir(folder.path()).filePath(model_name + "-results.pdf"));
}

// Item 7: a long run's time column says how long is left at its pace.
TEST(StateNeverLies, JobTimeSaysWhatIsLeftAtTheRunsPace)
{
    using embedlab::app::JobList;
    EXPECT_EQ(JobList::timeText(20000, 0.1), "20.0 s, about 3 min left");
    EXPECT_EQ(JobList::timeText(30000, 0.5), "30.0 s, about 30 s left");
    EXPECT_EQ(JobList::timeText(100000, 0.02), "100.0 s, about 82 min left");
    EXPECT_EQ(JobList::timeText(200000, 0.02), "200.0 s, about 2.7 h left");
    EXPECT_EQ(JobList::timeText(2000, 0.5), "2.0 s") << "too early to know the pace";
    EXPECT_EQ(JobList::timeText(60000, 0.005), "60.0 s") << "under 1 %";
    EXPECT_EQ(JobList::timeText(60000, 1.0), "60.0 s") << "done";
}

namespace {

// Whether any two of `axis`'s tick labels, as drawn, overlap.
bool tick_labels_collide(QCPAxis* axis)
{
    const QFontMetrics metrics(axis->tickLabelFont());
    const QVector<double> ticks = axis->tickVector();
    const QVector<QString> labels = axis->tickVectorLabels();
    for (int i = 1; i < ticks.size(); ++i) {
        const double gap = std::abs(axis->coordToPixel(ticks[i]) - axis->coordToPixel(ticks[i - 1]));
        const double half_widths =
            (metrics.horizontalAdvance(labels[i - 1]) + metrics.horizontalAdvance(labels[i])) / 2.0;
        if (gap < half_widths + 2)
            return true;
    }
    return false;
}

} // namespace

// Seen on the 1366x768 and 1366x700 screenshots: the pca row of the method panel scrolled
// sideways; the LLE tab scrolled; the LLE histogram's cosine tick labels ran together
// ("0 0.20.40.60.8 1").
TEST(StateNeverLies, ThePcaRowAndTheLleHistogramFitALaptop)
{
    FreshWindow fresh;
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.resize(1366, 700);
    window.show();
    open_bundled(window);
    ASSERT_TRUE(window.showView("results"));
    window.methodPanel()->setMethod("pca");
    QApplication::processEvents();
    auto* pca = window.methodPanel()->findChild<QScrollArea*>("pca_page");
    ASSERT_NE(pca, nullptr);
    EXPECT_EQ(pca->horizontalScrollBar()->maximum(), 0)
        << "the pca row is " << pca->widget()->minimumSizeHint().width() << " px in "
        << pca->viewport()->width();

    ASSERT_TRUE(window.showView("lle"));
    ASSERT_TRUE(
        wait_for([&] { return window.jobs().idle() && !window.neighbourView()->data().x.isEmpty(); }));
    QApplication::processEvents();
    // At 1366x700 the LLE and Fourier pages have room for their minimum: they do not scroll
    // (the LLE tab scrolled 34 px, to its word-wrapped labels' preferred height).
    for (const char* tab : {"lle", "fourier"}) {
        window.showView(tab);
        QApplication::processEvents();
        auto* page = qobject_cast<QScrollArea*>(window.findChild<QTabWidget*>()->currentWidget());
        ASSERT_NE(page, nullptr);
        EXPECT_EQ(page->verticalScrollBar()->maximum(), 0) << tab;
        EXPECT_EQ(page->horizontalScrollBar()->maximum(), 0) << tab;
    }
    window.showView("lle");
    QCustomPlot* plot = window.neighbourView()->plot();
    plot->replot();
    QCPAxis* cosine = nullptr;
    for (auto* rect : plot->axisRects())
        if (rect->axis(QCPAxis::atBottom)->label().startsWith("reconstruction"))
            cosine = rect->axis(QCPAxis::atBottom);
    ASSERT_NE(cosine, nullptr);
    ASSERT_GE(cosine->tickVector().size(), 2);
    EXPECT_FALSE(tick_labels_collide(cosine))
        << QStringList(cosine->tickVectorLabels().begin(), cosine->tickVectorLabels().end())
               .join(" | ")
               .toStdString();
}
