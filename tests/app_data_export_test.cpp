// Issue 41 items 10 and 13 in the window: File > Export data writes the current
// tab's plotted values; Ctrl+Z after Delete puts a results row back in its place
// with its request (its command and its export still work); the Jobs dock is a
// compact list whose errors are read in full, whose right-click menu re-runs a
// job, and whose progress text is drawn beside the bar, not over it.
//
// libtorch before Qt (brief).
#include "embedlab/resources.hpp"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QFile>
#include <QImage>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include "analyses.hpp"
#include "cli_support.hpp"
#include "gui_test_support.hpp"
#include "jobs_dock.hpp"
#include "main_window.hpp"
#include "method_panel.hpp"
#include "plot_data_export.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "workbench_support.hpp"

using embedlab::app::JobList;
using embedlab::app::MainWindow;
using embedlab::test::wait_for;

namespace {

using embedlab::test::open_bundled;

// Every line of the results table as shown (the original's row included), in order.
QVector<QStringList> table_text(QTableView* table)
{
    return embedlab::test::model_text(table->model());
}

QAction* menu_action(MainWindow& window, const QString& text)
{
    for (QAction* menu : window.menuBar()->actions())
        for (QAction* a : menu->menu()->actions())
            if (a->text().remove('&').startsWith(text))
                return a;
    return nullptr;
}

void activate(MainWindow& window)
{
    window.show();
    window.activateWindow(); // the shortcut map needs the window active
    wait_for([&] { return window.isActiveWindow(); }, 2000);
}

} // namespace

TEST(Workbench, CtrlZPutsDeletedRowsBackInPlaceWithTheirRequests)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    for (int rank : {4, 8, 16}) { // on a short text: the rows, not their numbers, are tested
        auto request = window.methodPanel()->request("pca");
        request.rank = rank;
        request.eval_tokens = 48;
        ASSERT_GT(window.runCompression(request), 0);
    }
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    auto* results = window.resultsView();
    ASSERT_EQ(results->rows().size(), 3u);
    const auto before = table_text(results->table());
    QStringList commands;
    for (int row = 0; row < 3; ++row)
        commands << window.rowText(row, MainWindow::RowText::Command);
    ASSERT_FALSE(commands[1].isEmpty());

    activate(window);
    window.showView("results");
    QTableView* table = results->table();
    table->setFocus();
    results->selectRow(1);
    embedlab::test::press_key(table, Qt::Key_Delete);
    ASSERT_EQ(results->rows().size(), 2u) << "Delete removed the selected row";
    results->selectRow(0);
    embedlab::test::press_key(table, Qt::Key_Delete);
    ASSERT_EQ(results->rows().size(), 1u);
    EXPECT_EQ(window.rowText(0, MainWindow::RowText::Command), commands[2])
        << "the requests moved with the rows";
    QAction* undo = menu_action(window, "Undo");
    ASSERT_NE(undo, nullptr);
    EXPECT_EQ(undo->text().remove('&'), "Undo delete row");
    EXPECT_TRUE(undo->shortcuts().contains(QKeySequence("Ctrl+Z")));

    embedlab::test::press_key(table, Qt::Key_Z, Qt::ControlModifier);
    ASSERT_EQ(results->rows().size(), 2u) << "Ctrl+Z put the last deleted row back";
    EXPECT_EQ(window.rowText(0, MainWindow::RowText::Command), commands[0]);
    EXPECT_EQ(window.rowText(1, MainWindow::RowText::Command), commands[2]);
    embedlab::test::press_key(table, Qt::Key_Z, Qt::ControlModifier);
    ASSERT_EQ(results->rows().size(), 3u);
    EXPECT_EQ(table_text(table), before) << "both rows back in place, with the same cells";
    for (int row = 0; row < 3; ++row) {
        EXPECT_EQ(window.rowText(row, MainWindow::RowText::Command), commands[row]) << row;
        EXPECT_FALSE(window.rowText(row, MainWindow::RowText::Python).isEmpty());
    }
    EXPECT_EQ(results->selectedRow(), 1) << "the row put back is selected";
    QAction* export_model = menu_action(window, "Export compressed model");
    ASSERT_NE(export_model, nullptr);
    EXPECT_TRUE(export_model->isEnabled()) << "the restored row's model can be exported again";
    EXPECT_FALSE(undo->isEnabled()) << "nothing left to undo";
    EXPECT_TRUE(window.unsavedText().contains("3 results rows"));
}

TEST(Workbench, ExportDataWritesTheCurrentTabsPlottedValues)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    QAction* action = menu_action(window, "Export data");
    ASSERT_NE(action, nullptr);
    EXPECT_EQ(action->shortcut(), QKeySequence("Ctrl+D"));
    QTemporaryDir dir;
    window.showView("spectrum");
    QStringList files;
    const QString error = window.exportData(dir.filePath("spectrum.csv"), &files);
    ASSERT_TRUE(error.isEmpty()) << error.toStdString();
    ASSERT_EQ(files.size(), 2);
    QFile in(files[0]);
    ASSERT_TRUE(in.open(QIODevice::ReadOnly));
    const auto lines = embedlab::views::parseCsv(QString::fromUtf8(in.readAll()));
    const auto& eigenvalues = window.spectrumView()->data().eigenvalues;
    ASSERT_EQ(lines.size(), eigenvalues.size() + 1);
    EXPECT_EQ(lines[0].value(2), "eigenvalue of the covariance");
    for (int k = 0; k < eigenvalues.size(); ++k)
        ASSERT_EQ(lines[k + 1].value(2).toDouble(), eigenvalues[k]) << k;
    window.showView("compare");
    EXPECT_TRUE(window.exportData(dir.filePath("compare.csv")).contains("no plot"));
}

TEST(JobsDock, AFailedJobsWholeErrorIsReadAndItsMenuReRunsIt)
{
    MainWindow window;
    window.resize(700, 500);
    window.show();
    JobList* list = window.jobList();
    EXPECT_EQ(list->columnCount(), 4) << "no column of buttons";
    QString message = "could not read /very/long/path/to/a/model/directory/that/does/not/exist:";
    // Long enough to wrap onto several lines at any dock width an earlier test's saved layout gives.
    for (int i = 0; i < 40; ++i)
        message += QString(" reason %1 of a long explanation that must wrap").arg(i);
    message += " END";
    int runs = 0;
    const int id = window.jobs().submit(
        "failing job", [&runs, message](const embedlab::ProgressFn&) -> std::function<void()> {
            ++runs;
            throw embedlab::InputError(message.toStdString());
        });
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }, 5000));
    QTreeWidgetItem* item = list->item(id);
    ASSERT_NE(item, nullptr);
    EXPECT_EQ(item->text(JobList::kState), "failed");
    for (int c = 0; c < list->columnCount(); ++c)
        EXPECT_EQ(list->itemWidget(item, c), nullptr) << "no button in column " << c;
    ASSERT_EQ(item->childCount(), 1);
    QTreeWidgetItem* why = item->child(0);
    EXPECT_EQ(why->text(0), message);
    EXPECT_EQ(why->toolTip(0), message);
    EXPECT_TRUE(why->isFirstColumnSpanned());
    // The error's line is as tall as its text wrapped at the list's width.
    QApplication::processEvents();
    const QRect rect = list->visualItemRect(why);
    const QRect wrapped =
        list->fontMetrics().boundingRect(QRect(0, 0, rect.width() - 8, 1 << 20), Qt::TextWordWrap, message);
    EXPECT_GT(wrapped.height(), 2 * list->fontMetrics().height()) << "the message does wrap here";
    EXPECT_GE(rect.height(), wrapped.height()) << "row " << rect.height() << " px, text " << wrapped.height();
    // Narrower: the line grows.
    list->resize(list->width() / 2, list->height());
    window.resize(350, 500);
    QApplication::processEvents();
    wait_for([&] { return list->visualItemRect(why).height() > rect.height(); }, 1000);
    EXPECT_GT(list->visualItemRect(why).height(), rect.height());

    // Right-click: Re-run (and Copy error) in the job's menu; Re-run queues it again.
    QString offered;
    QTimer::singleShot(0, [&] {
        if (auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget())) {
            for (QAction* a : menu->actions()) {
                offered += a->text() + (a->isEnabled() ? "+" : "-") + ";";
                if (a->text() == "Re-run")
                    a->trigger();
            }
            menu->close();
        }
    });
    const QPoint at = list->visualItemRect(item).center();
    QContextMenuEvent right(QContextMenuEvent::Mouse, at, list->viewport()->mapToGlobal(at));
    QApplication::sendEvent(list->viewport(), &right);
    EXPECT_EQ(offered, "Re-run+;Cancel-;Copy error+;");
    ASSERT_TRUE(wait_for([&] { return runs == 2 && window.jobs().idle(); }, 5000)) << "Re-run ran it again";
    EXPECT_EQ(list->topLevelItemCount(), 2);
    std::unique_ptr<QMenu> menu(list->menuFor(why, nullptr)); // the error's line: its job's menu
    menu->actions().value(2)->trigger();
    EXPECT_EQ(QApplication::clipboard()->text(), message);
}

TEST(JobsDock, ProgressTextIsDrawnBesideTheBarInTheTextColour)
{
    std::atomic<bool> release{false}; // outlives the window, whose end waits for the job
    MainWindow window;
    window.resize(800, 500);
    window.show();
    const int id = window.jobs().submit(
        "half done", [&release](const embedlab::ProgressFn& progress) -> std::function<void()> {
            while (!release) { // reporting (progress is sent at most every 50 ms; a cancel stops it)
                embedlab::report_progress(progress, 1, 2);
                QThread::msleep(5);
            }
            return [] {};
        });
    JobList* list = window.jobList();
    QTreeWidgetItem* item = list->item(id);
    ASSERT_NE(item, nullptr);
    ASSERT_TRUE(wait_for(
        [&] { return item->data(JobList::kProgress, JobList::kProgressRole).toInt() == 500; }, 5000));
    const QRect cell = list->visualRect(list->model()->index(0, JobList::kProgress));
    const QImage image = list->viewport()->grab().toImage();
    release = true;
    const QRect bar = JobList::barRect(cell, list->fontMetrics());
    const QRect text = JobList::percentRect(cell, list->fontMetrics());
    EXPECT_FALSE(bar.intersects(text)) << "the percentage is beside the bar, not over it";
    const QColor fill = list->palette().color(QPalette::Highlight);
    const QColor ink = list->palette().color(QPalette::Text);
    int filled = 0, inked = 0;
    for (int x = bar.left() + 2; x < bar.left() + bar.width() / 2 - 2; ++x)
        filled += image.pixelColor(x, bar.center().y()) == fill;
    for (int y = text.top(); y <= text.bottom(); ++y)
        for (int x = text.left(); x <= text.right(); ++x)
            inked += std::abs(qGray(image.pixel(x, y)) - qGray(ink.rgb())) < 60;
    EXPECT_GT(filled, bar.width() / 2 - 8) << "half the bar is filled";
    EXPECT_GT(inked, 10) << "the percentage is drawn in the text colour";
    EXPECT_GT(std::abs(qGray(fill.rgb()) - qGray(ink.rgb())) +
                  std::abs(qGray(list->palette().color(QPalette::Base).rgb()) - qGray(ink.rgb())),
              100);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }, 5000));
    EXPECT_EQ(item->text(JobList::kState), "done");
}

TEST(Workbench, UndoWaitsForAFocusedTextFieldsOwnUndo)
{
    // Ctrl+Z in a text field undoes its typing, not a deleted row (the window's
    // other shortcuts win over fields; undo is the field's).
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.resultsView()->addRow(embedlab::RunSummary{.method = "pca", .parameters = "rank 8"});
    window.resultsView()->removeRow(0);
    activate(window);
    window.showView("results");
    QLineEdit* text = nullptr;
    for (auto* e : window.methodPanel()->findChildren<QLineEdit*>())
        if (e->isVisible() && e->isEnabled() && !e->isReadOnly())
            text = e;
    ASSERT_NE(text, nullptr);
    text->setFocus();
    embedlab::test::press_key(text, Qt::Key_Z, Qt::ControlModifier);
    EXPECT_TRUE(window.resultsView()->rows().empty()) << "the field kept Ctrl+Z";
    window.resultsView()->table()->setFocus();
    embedlab::test::press_key(window.resultsView()->table(), Qt::Key_Z, Qt::ControlModifier);
    EXPECT_EQ(window.resultsView()->rows().size(), 1u);
}

// Issue 61 item 5: each copied form of a row, run as pasted, gives the row's numbers:
// the command (eval_tokens now a compress flag, --out named by the settings), the JSON
// as a worker job (it carries "kind" and "out"), and the Python call.
// Row 0 of `window`, copied as each form and run as pasted, gives the row's numbers;
// its command evaluates the first `eval_tokens` ids and writes `out` (named by the model and
// the settings).
static void run_each_copied_form_of_row(MainWindow& window, int eval_tokens, const std::string& out)
{
    namespace fs = std::filesystem;
    const auto row = window.resultsView()->rows()[0];

    embedlab::test::TempDir dir;
    const auto in_dir = [&](const std::string& line) {
        return "cd " + embedlab::test::quote(dir.path().string()) + " && " + line;
    };
    const std::string cli = embedlab::test::quote(EMBEDLAB_CLI_PATH);
    // The row's figures: the same text, ids and seed give the same numbers (to rounding).
    const auto same_as_row = [&](const nlohmann::ordered_json& j) {
        EXPECT_NEAR(j.at("ppl").get<double>(), row.ppl, 1e-9 * row.ppl) << j.dump();
        EXPECT_EQ(j.at("params_after").get<int64_t>(), row.params_after) << j.dump();
        EXPECT_EQ(j.at("eval_tokens").get<int64_t>(), row.eval_tokens) << j.dump();
    };

    // The command, as pasted (its program on PATH is embedlab-cli: here the built one).
    std::string command = window.rowText(0, MainWindow::RowText::Command).toStdString();
    ASSERT_EQ(command.find('#'), std::string::npos) << "every field has a flag: " << command;
    EXPECT_NE(command.find("--eval-tokens " + std::to_string(eval_tokens)), std::string::npos) << command;
    EXPECT_NE(command.find("--out " + out), std::string::npos) << command;
    command.replace(0, std::string("embedlab-cli").size(), cli);
    ASSERT_EQ(std::system(in_dir(command + " --json --quiet > command.json 2>&1").c_str()), 0)
        << embedlab::test::read_text(dir / "command.json");
    // --json prints the directory's embedlab.json: its evaluation and accounting.
    const auto manifest = nlohmann::ordered_json::parse(embedlab::test::read_text(dir / "command.json"));
    same_as_row({{"ppl", manifest.at("evaluation").at("compressed").at("ppl")},
                 {"params_after", manifest.at("accounting").at("params_after")},
                 {"eval_tokens", manifest.at("evaluation").at("tokens")}});

    // The JSON request, as a worker job (its own output directory beside the command's).
    auto job =
        nlohmann::ordered_json::parse(window.rowText(0, MainWindow::RowText::JsonRequest).toStdString());
    EXPECT_EQ(job["kind"], "compress");
    job["out"] = "by-job";
    std::ofstream(dir / "job.json") << job.dump();
    ASSERT_EQ(std::system(in_dir(cli + " worker --job job.json > job.out 2>&1").c_str()), 0)
        << embedlab::test::read_text(dir / "job.out");
    std::istringstream lines(embedlab::test::read_text(dir / "job.out"));
    std::optional<nlohmann::ordered_json> result;
    for (std::string line; std::getline(lines, line);)
        if (auto e = nlohmann::ordered_json::parse(line, nullptr, false);
            e.is_object() && e.value("event", "") == "result")
            result = e.at("result");
    ASSERT_TRUE(result.has_value()) << embedlab::test::read_text(dir / "job.out");
    same_as_row(result->at("summary"));

    // The Python call, printing its summary as JSON.
    const fs::path python_dir = fs::path(EMBEDLAB_CLI_PATH).parent_path().parent_path() / "python";
    if (!fs::exists(python_dir / "embedlab"))
        GTEST_SKIP() << "the Python module is not built at " << python_dir << " (command and job checked)";
    std::string script = window.rowText(0, MainWindow::RowText::Python).toStdString();
    const std::string print = "print(run.summary)";
    ASSERT_NE(script.find(print), std::string::npos) << script;
    script.replace(script.find(print), print.size(), "import json; print(json.dumps(run.summary))");
    std::ofstream(dir / "row.py") << script;
    ASSERT_EQ(std::system(in_dir("PYTHONPATH=" + embedlab::test::quote(python_dir.string()) +
                                 " /usr/bin/python3 row.py > python.json 2>python.err")
                              .c_str()),
              0)
        << embedlab::test::read_text(dir / "python.err");
    const auto by_python = nlohmann::ordered_json::parse(embedlab::test::read_text(dir / "python.json"));
    same_as_row(by_python);
}

TEST(Reproduce, EveryCopiedFormRunAsPastedGivesTheRowsNumbers)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    auto request = window.methodPanel()->request("pca");
    request.rank = 12;
    request.eval_tokens = 300; // the workbench's first ids, not the whole text
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u);
    ASSERT_EQ(window.resultsView()->rows()[0].eval_tokens, 299);
    run_each_copied_form_of_row(window, 300, "tinygpt2-f16-pca-rank-12");
}

// The same for a masked-LM encoder's row: its pseudo-perplexity is the engine's run's, so
// the command, the worker job and the Python call give it too (issue 61 items 5-6).
TEST(Reproduce, AnEncodersCopiedFormsGiveItsPseudoPerplexity)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    embedlab::test::open_shown(window, QString(EMBEDLAB_SOURCE_DIR) + "/tests/data/encoders/distilbert-mlm");
    auto request = window.methodPanel()->request("pca");
    request.rank = 16;
    request.eval_tokens = 64;
    request.divergence = true;
    ASSERT_FALSE(request.eval_text.empty()) << "a masked-LM encoder is evaluated on the panel's text";
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u) << window.statusBar()->currentMessage().toStdString();
    const auto row = window.resultsView()->rows()[0];
    ASSERT_EQ(row.eval_tokens, 64); // masked positions: every id in turn
    ASSERT_TRUE(std::isfinite(row.ppl) && std::isfinite(row.kl_mean)) << row.ppl << " " << row.kl_mean;
    run_each_copied_form_of_row(window, 64, "distilbert-mlm-pca-rank-16");
}

// Issue 61 item 7: Run with a field out of range says why in the status bar (where a user
// looks after pressing it), not only beside the field; nothing is queued.
TEST(Workbench, ARefusedRunSaysWhyInTheStatusBar)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    open_bundled(window);
    auto* panel = window.methodPanel();
    panel->setMethod("pca");
    auto* stack = panel->findChild<QStackedWidget*>();
    ASSERT_NE(stack, nullptr);
    auto* box = stack->currentWidget()->findChild<QSpinBox*>("rank");
    ASSERT_NE(box, nullptr);
    embedlab::test::type_number(box, "99999");
    embedlab::test::press_key(box, Qt::Key_Return);
    ASSERT_FALSE(panel->problem().isEmpty());
    auto* run = panel->findChild<QPushButton*>("run");
    ASSERT_NE(run, nullptr);
    run->click();
    const QString said = window.statusBar()->currentMessage();
    EXPECT_TRUE(said.startsWith("Not run: ")) << said.toStdString();
    EXPECT_TRUE(said.contains("99999")) << said.toStdString();
    EXPECT_TRUE(window.jobs().idle()) << "nothing was queued";
}
