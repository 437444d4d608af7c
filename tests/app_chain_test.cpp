// Issue 60 (stacking) in the workbench: the method panel builds a chain as a user does
// (trim chosen with the keys, Then... clicked, the next method typed, numbers typed and
// committed with Return or Tab) at 1366x768; Run makes ONE job whose row is the chain's
// own, with the same parameters, bytes and perplexities as `embedlab-cli compress
// --method trim ... --then pca ... --then-store q8_0` on the same settings; the row's
// copied command runs that chain again, its JSON is the engine's pipeline request and its
// Python a compress_chain call. Two table methods in one chain are refused in the panel,
// before any run, with the engine's own message.
//
// libtorch before Qt (brief).
#include "embedlab/pipeline_request.hpp"
#include "embedlab/results.hpp"
#include "embedlab/trim_fields.hpp"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStatusBar>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

#include "analyses.hpp"
#include "cli_support.hpp"
#include "gui_test_support.hpp"
#include "job_controller.hpp"
#include "main_window.hpp"
#include "method_flags.hpp"
#include "method_panel.hpp"
#include "plot_view.hpp"
#include "results_view.hpp"
#include "sshd_fixture.hpp"
#include "test_paths.hpp"
#include "test_support.hpp"
#include "workbench_support.hpp"

using embedlab::app::MainWindow;
using embedlab::app::MethodPanel;
using embedlab::test::press_key;
using embedlab::test::type_number;
using embedlab::test::wait_for;

namespace {

using Json = nlohmann::ordered_json;

// The window at a 1366x768 laptop's size, shown offscreen.
void chain_show_window(MainWindow& window)
{
    window.setAskBeforeDiscarding(false);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.resize(1366, 768);
    window.show();
    window.showView("results");
    QApplication::processEvents();
}

// Presses `key` on the focused widget `w` (the text a key types, for a letter or digit).
void chain_key(QWidget* w, int key, const QString& text = {})
{
    w->setFocus();
    press_key(w, key, Qt::NoModifier, text);
    QApplication::processEvents();
}

// Types `text` into a combo box as a user picks an item by its first letters.
void chain_type_choice(QComboBox* box, const QString& text)
{
    // Keys typed within the keyboard interval extend the search: a new word waits it out.
    wait_for([] { return false; }, QApplication::keyboardInputInterval() + 100);
    box->setFocus();
    for (QChar c : text)
        press_key(box,
                  c.isDigit() ? Qt::Key_0 + (c.unicode() - '0') : Qt::Key_A + (c.toUpper().unicode() - 'A'),
                  Qt::NoModifier, QString(c));
    QApplication::processEvents();
}

// The method panel's widget `name` on the page `page` ("pca_page", "trim_page").
template <class W> W* chain_field(MethodPanel* panel, const char* page, const char* name)
{
    QWidget* p = panel->findChild<QWidget*>(page);
    return p ? p->findChild<W*>(name) : nullptr;
}

// A results row's action ("copy_command", ...) triggered, and what it put on the clipboard.
QString chain_copy(MainWindow& window, const char* name)
{
    auto* action = window.findChild<QAction*>(name);
    EXPECT_NE(action, nullptr) << name;
    if (!action)
        return {};
    QGuiApplication::clipboard()->clear();
    action->trigger();
    return QGuiApplication::clipboard()->text();
}

// Runs a compress line with --json --quiet in `dir` and returns the record it prints.
Json chain_cli_record(std::vector<std::string> argv, const std::filesystem::path& dir)
{
    argv[0] = EMBEDLAB_CLI_PATH;
    argv.insert(argv.end(), {"--json", "--quiet"});
    const auto printed = dir / "printed.json";
    const std::string line = "cd " + embedlab::test::quote(dir.string()) + " && " +
                             embedlab::cli::shell_command_line(argv) + " >" +
                             embedlab::test::quote(printed.string()) + " 2>&1 </dev/null";
    EXPECT_EQ(std::system(line.c_str()), 0) << line << "\n" << embedlab::test::read_text(printed);
    return Json::parse(embedlab::test::read_text(printed), nullptr, false);
}

// The row's numbers the chain decides, against the CLI record's chain summary.
void expect_chain_row(const embedlab::RunSummary& row, const Json& record, const std::string& where)
{
    ASSERT_TRUE(record.is_object() && record.contains("pipeline")) << where << ": " << record.dump();
    const embedlab::RunSummary cli = embedlab::summary_from_json(record["pipeline"]["summary"]);
    EXPECT_EQ(row.method, cli.method) << where;
    EXPECT_EQ(row.parameters, cli.parameters) << where;
    EXPECT_EQ(row.params_before, cli.params_before) << where;
    EXPECT_EQ(row.params_after, cli.params_after) << where;
    EXPECT_EQ(row.bytes_before, cli.bytes_before) << where;
    EXPECT_EQ(row.bytes_after, cli.bytes_after) << where;
    EXPECT_EQ(row.model_bytes_before, cli.model_bytes_before) << where;
    EXPECT_EQ(row.model_bytes_after, cli.model_bytes_after) << where;
    EXPECT_EQ(row.eval_tokens, cli.eval_tokens) << where;
    EXPECT_NEAR(row.ppl, cli.ppl, 1e-9 * cli.ppl) << where;
    EXPECT_NEAR(row.ppl_original, cli.ppl_original, 1e-9 * cli.ppl_original) << where;
}

// Empties the panel's frequency and evaluation boxes when the test ends, so the choice
// the panel saves names no file of the test's temporary directory.
struct ChainTextBoxesCleared {
    MethodPanel* panel;
    ~ChainTextBoxesCleared()
    {
        if (auto* frequencies = panel->findChild<QLineEdit*>("freq_text"))
            frequencies->clear();
        panel->evaluationText()->clear();
    }
};

} // namespace

TEST(WorkbenchChain, TrimThenPcaBuiltWithKeysRunsAsOneRowEqualToTheClisChain)
{
    MainWindow window;
    chain_show_window(window);
    embedlab::test::open_bundled(window);
    MethodPanel* panel = window.methodPanel();
    panel->setTarget({}); // this computer, whatever an earlier test left chosen
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    auto* method = panel->findChild<QComboBox*>();
    ASSERT_NE(method, nullptr);
    // trim is the method box's last entry (a chain's first step): End chooses it.
    chain_key(method, Qt::Key_End);
    ASSERT_EQ(panel->method(), "trim");
    // Its frequency text and the evaluation text pasted into their boxes: slices of the
    // bundled text, a short evaluation (a trimmed chain evaluates all of its text).
    const embedlab::test::TextSlices texts(20000, 3000);
    const ChainTextBoxesCleared cleared{panel};
    auto* frequencies = panel->findChild<QLineEdit*>("freq_text");
    ASSERT_NE(frequencies, nullptr);
    EXPECT_TRUE(frequencies->isVisible()); // trim reads it
    frequencies->setText(QString::fromStdString(texts.fit));
    panel->evaluationText()->setText(QString::fromStdString(texts.eval));
    auto* coverage = chain_field<QDoubleSpinBox>(panel, "trim_page", "coverage");
    ASSERT_NE(coverage, nullptr);
    EXPECT_TRUE(coverage->isVisible());
    type_number(coverage, "0.9");
    chain_key(coverage, Qt::Key_Return);
    EXPECT_DOUBLE_EQ(coverage->value(), 0.9);
    // Then... adds the step; its box takes the focus and a typed "pc" picks pca.
    auto* then = panel->findChild<QPushButton*>("then");
    ASSERT_NE(then, nullptr);
    then->click();
    auto* then_method = panel->findChild<QComboBox*>("then_method");
    ASSERT_NE(then_method, nullptr);
    ASSERT_TRUE(then_method->isVisible());
    chain_type_choice(then_method, "pc");
    ASSERT_EQ(panel->thenMethod(), "pca");
    // pca's own generated page shows beside trim's: rank 16 (Return), stored as q8_0.
    auto* rank = chain_field<QSpinBox>(panel, "pca_page", "rank");
    ASSERT_NE(rank, nullptr);
    ASSERT_TRUE(rank->isVisible());
    type_number(rank, "16");
    chain_key(rank, Qt::Key_Return);
    auto* store = chain_field<QComboBox>(panel, "pca_page", "store");
    ASSERT_NE(store, nullptr);
    chain_type_choice(store, "q8");
    ASSERT_EQ(store->currentData().toString(), "q8_0");
    // The chain in words, as its row will be labelled; nothing stops it.
    auto* label = panel->findChild<QLabel*>("chain_label");
    ASSERT_NE(label, nullptr);
    EXPECT_TRUE(label->isVisible());
    EXPECT_EQ(panel->chainLabel().toStdString(), "trim 0.9 \u2192 pca rank 16 \u2192 q8_0");
    EXPECT_TRUE(label->text().contains(panel->chainLabel())) << label->text().toStdString();
    EXPECT_EQ(panel->problem(), QString());
    // The chain's controls fit the laptop's screen: Run is still inside the window.
    auto* run = panel->findChild<QPushButton*>("run");
    ASSERT_NE(run, nullptr);
    const QRect run_at(run->mapTo(&window, QPoint(0, 0)), run->size());
    EXPECT_TRUE(run->isVisible() && window.rect().contains(run_at))
        << "Run at " << run_at.y() << " in a window " << window.height() << " high";
    EXPECT_LE(window.width(), 1366);

    // Run: one job, one row of its own, labelled by its steps.
    auto* results = window.resultsView();
    const size_t before = results->rows().size();
    run->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }))
        << window.statusBar()->currentMessage().toStdString();
    ASSERT_EQ(results->rows().size(), before + 1) << failure.toStdString();
    const embedlab::RunSummary row = results->rows().back();
    EXPECT_EQ(row.method, "chain");
    EXPECT_EQ(row.parameters, "trim 0.9 \u2192 pca rank 16 \u2192 q8_0");
    EXPECT_LT(row.params_after, row.params_before);
    // In the Pareto plot the chain is a series of its own, its one point this row.
    const QCPCurve* chains = results->series("chain");
    ASSERT_NE(chains, nullptr);
    EXPECT_EQ(chains->dataCount(), 1);
    // In a colour of its own: no method's, registered or named by a row.
    const QColor chain_colour = chains->pen().color();
    for (const auto& m : embedlab::method_registry())
        EXPECT_NE(chain_colour, embedlab::views::method_colour(QString::fromLatin1(m.name))) << m.name;
    for (const auto& r : results->rows())
        if (r.method != "chain") {
            EXPECT_NE(chain_colour, results->series(QString::fromStdString(r.method))->pen().color())
                << r.method;
        }

    // The CLI's chain on the same settings.
    embedlab::test::TempDir dir;
    const std::string model = embedlab::app::default_model();
    expect_chain_row(
        row,
        chain_cli_record({"embedlab-cli", "compress", model, "--method", "trim", "--freq-text", texts.fit,
                          "--coverage", "0.9", "--then", "pca", "--rank", "16", "--then-store", "q8_0",
                          "--eval-text", texts.eval, "--out", (dir / "by-hand").string()},
                         dir.path()),
        "the CLI's chain");

    // Copy as command: the --then line, which reproduces the row.
    results->selectRow(static_cast<int>(results->rows().size()) - 1);
    const QString command = chain_copy(window, "copy_command");
    for (const char* part : {"embedlab-cli compress ", "--method trim", "--coverage 0.9", "--then pca",
                             "--rank 16", "--then-store q8_0", "--out "})
        EXPECT_TRUE(command.contains(part)) << part << " in " << command.toStdString();
    EXPECT_FALSE(command.contains("#")) << command.toStdString(); // nothing left out
    {
        // The copied line as sh splits it: run through sh itself, with embedlab-cli the build's.
        std::string line = command.toStdString();
        line.replace(0, std::string("embedlab-cli").size(), embedlab::test::quote(EMBEDLAB_CLI_PATH));
        const auto printed = dir / "copied.json";
        const std::string run_line = "cd " + embedlab::test::quote(dir.path().string()) + " && " + line +
                                     " --json --quiet >" + embedlab::test::quote(printed.string()) +
                                     " 2>&1 </dev/null";
        ASSERT_EQ(std::system(run_line.c_str()), 0) << run_line << "\n" << embedlab::test::read_text(printed);
        expect_chain_row(row, Json::parse(embedlab::test::read_text(printed), nullptr, false),
                         "the copied command");
    }

    // Copy as JSON: the pipeline job the worker runs, the engine's own form of the request.
    const Json job = Json::parse(chain_copy(window, "copy_json_request").toStdString(), nullptr, false);
    ASSERT_TRUE(job.is_object()) << job.dump();
    EXPECT_EQ(job.value("kind", ""), "compress");
    EXPECT_EQ(job["pipeline"],
              Json::parse(R"([{"method": "trim", "freq_text": ")" + texts.fit +
                          R"(", "coverage": 0.9}, {"method": "pca", "rank": 16, "store": "q8_0"}])"));
    Json request = job;
    request.erase("kind");
    request.erase("out");
    EXPECT_EQ(embedlab::pipeline_json(embedlab::pipeline_from_json(request)), request);
    EXPECT_EQ(embedlab::pipeline_label(embedlab::pipeline_from_json(request)), row.parameters);

    // Copy as Python: compress_chain with the same steps.
    const QString python = chain_copy(window, "copy_python");
    EXPECT_TRUE(python.startsWith("import embedlab\nchain = embedlab.compress_chain(\"" +
                                  QString::fromStdString(model) +
                                  "\", [{\"method\": \"trim\", \"freq_text\": "))
        << python.toStdString();
    EXPECT_TRUE(python.contains("{\"method\": \"pca\", \"rank\": 16, \"store\": \"q8_0\"}]"))
        << python.toStdString();
    EXPECT_TRUE(python.endsWith(")\nprint(chain.summary)\n")) << python.toStdString();

    // A saved session keeps the chain row's request: reopened, its row copies the same
    // command and the same JSON job.
    const QString session = QString::fromStdString((dir / "chain.embedlab").string());
    ASSERT_TRUE(window.saveSession(session)) << window.statusBar()->currentMessage().toStdString();
    const size_t saved_rows = results->rows().size();
    ASSERT_TRUE(window.openSession(session)) << window.statusBar()->currentMessage().toStdString();
    ASSERT_EQ(results->rows().size(), saved_rows);
    results->selectRow(static_cast<int>(saved_rows) - 1);
    EXPECT_EQ(chain_copy(window, "copy_command"), command);
    EXPECT_EQ(Json::parse(chain_copy(window, "copy_json_request").toStdString(), nullptr, false), job);
    ASSERT_NE(results->series("chain"), nullptr);
    EXPECT_EQ(results->series("chain")->pen().color(), chain_colour);
    // and the panel's chain as it was built.
    EXPECT_EQ(panel->method(), "trim");
    EXPECT_EQ(panel->thenMethod(), "pca");
    EXPECT_EQ(panel->chainLabel().toStdString(), "trim 0.9 \u2192 pca rank 16 \u2192 q8_0");
    EXPECT_EQ(frequencies->text().toStdString(), texts.fit);

    // x removes the step: trim alone again, then back to a method alone.
    panel->findChild<QPushButton*>("remove_then")->click();
    EXPECT_EQ(panel->thenMethod(), QString());
    EXPECT_TRUE(then->isVisible());
    EXPECT_EQ(panel->chainLabel().toStdString(), "trim 0.9");
    chain_key(method, Qt::Key_Home);
    EXPECT_EQ(panel->method(), MethodPanel::methods().front());
    EXPECT_FALSE(panel->chainJson().has_value());
    EXPECT_FALSE(label->isVisible());
}

// Trim's page is built from the engine's declarations of its fields (trim_fields.hpp):
// its boxes are those fields, in their order, with their labels, help, ranges and
// first values; the frequency text is the panel's shared row.
TEST(WorkbenchChain, TrimsPageIsTheEnginesDeclarationsOfItsFields)
{
    MethodPanel panel;
    QWidget* page = panel.findChild<QWidget*>("trim_page");
    ASSERT_NE(page, nullptr);
    std::vector<std::string> shown;
    for (QWidget* box : page->findChildren<QWidget*>())
        if (box->property("chain_step").toString() == "trim")
            shown.push_back(box->objectName().toStdString());
    std::vector<std::string> declared;
    for (const embedlab::MethodField& f : embedlab::trim_fields())
        if (f.name != "freq_text")
            declared.push_back(f.name);
    EXPECT_EQ(shown, declared);
    auto* frequencies = panel.findChild<QLineEdit*>("freq_text");
    ASSERT_NE(frequencies, nullptr);
    EXPECT_FALSE(page->isAncestorOf(frequencies)); // the shared row every frequency reader uses
    for (const embedlab::MethodField& f : embedlab::trim_fields()) {
        if (f.name == "freq_text")
            continue;
        auto* box = page->findChild<QWidget*>(QString::fromStdString(f.name));
        ASSERT_NE(box, nullptr) << f.name;
        EXPECT_EQ(box->property("field_label").toString().toStdString(), f.doc.label) << f.name;
        const std::string range = embedlab::field_range_text(f.doc);
        EXPECT_TRUE(box->toolTip().startsWith(
            QString::fromStdString(range.empty() ? f.doc.help : f.doc.help + ": " + range)))
            << f.name << ": " << box->toolTip().toStdString();
        if (auto* d = qobject_cast<QDoubleSpinBox*>(box)) {
            EXPECT_EQ(f.type, embedlab::RequestFieldType::Number) << f.name;
            EXPECT_DOUBLE_EQ(d->value(), f.default_value.get<double>()) << f.name;
            EXPECT_DOUBLE_EQ(d->maximum(), f.doc.hi) << f.name;
            EXPECT_DOUBLE_EQ(d->minimum(), 0) << f.name; // 0: the doc's zero, "off"
            EXPECT_TRUE(d->specialValueText().endsWith(QString::fromStdString(f.doc.zero))) << f.name;
        } else if (auto* i = qobject_cast<QSpinBox*>(box)) {
            EXPECT_EQ(f.type, embedlab::RequestFieldType::Integer) << f.name;
            EXPECT_EQ(i->value(), f.default_value.get<int>()) << f.name;
            EXPECT_EQ(i->maximum(), static_cast<int>(f.doc.hi)) << f.name;
            EXPECT_EQ(i->minimum(), 0) << f.name;
            EXPECT_TRUE(i->specialValueText().endsWith(QString::fromStdString(f.doc.zero))) << f.name;
        } else {
            auto* e = qobject_cast<QLineEdit*>(box);
            ASSERT_NE(e, nullptr) << f.name;
            EXPECT_EQ(f.type, embedlab::RequestFieldType::String) << f.name;
            EXPECT_EQ(e->text().toStdString(), f.default_value.get<std::string>()) << f.name;
            EXPECT_EQ(e->placeholderText().toStdString(), f.doc.value_name) << f.name;
        }
    }
}

// A session keeps a method row's request too: reopened in another window, its row copies
// the same command and JSON request.
TEST(WorkbenchChain, AReopenedSessionsMethodRowCopiesItsCommand)
{
    MainWindow window;
    chain_show_window(window);
    embedlab::test::open_bundled(window);
    auto request = window.methodPanel()->request("pca");
    request.rank = 8;
    request.eval_tokens = 256;
    ASSERT_GT(window.runCompression(request), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    const int row = static_cast<int>(window.resultsView()->rows().size()) - 1;
    ASSERT_GE(row, 0);
    window.resultsView()->selectRow(row);
    const QString command = chain_copy(window, "copy_command");
    const QString json = chain_copy(window, "copy_json_request");
    EXPECT_TRUE(command.contains("--method pca") && command.contains("--rank 8")) << command.toStdString();
    embedlab::test::TempDir dir;
    const QString file = QString::fromStdString((dir / "pca.embedlab").string());
    ASSERT_TRUE(window.saveSession(file));

    MainWindow other;
    chain_show_window(other);
    ASSERT_TRUE(other.openSession(file)) << other.statusBar()->currentMessage().toStdString();
    other.resultsView()->selectRow(row);
    EXPECT_EQ(chain_copy(other, "copy_command"), command);
    EXPECT_EQ(chain_copy(other, "copy_json_request"), json);
}

// A session whose chain rows name rows it does not have is refused, naming the member.
TEST(WorkbenchChain, ASessionsChainRowOutsideItsRowsIsRefusedNamingIt)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    embedlab::test::TempDir dir;
    const QString file = QString::fromStdString((dir / "s.embedlab").string());
    ASSERT_TRUE(window.saveSession(file));
    QFile in(file);
    ASSERT_TRUE(in.open(QIODevice::ReadOnly));
    QJsonObject session = QJsonDocument::fromJson(in.readAll()).object();
    in.close();
    EXPECT_TRUE(session.contains("row_chains"));
    const QJsonObject pipeline = QJsonDocument::fromJson(R"({"model": "m", "pipeline": [{"method": "trim",
        "freq_text": "f.txt", "keep": 900}]})")
                                     .object();
    session["row_chains"] = QJsonObject{{"0", pipeline}};
    embedlab::test::write_file(file.toStdString(), QJsonDocument(session).toJson().toStdString());
    EXPECT_FALSE(window.openSession(file));
    EXPECT_EQ(window.statusBar()->currentMessage(),
              file + ": row_chains: '0' is not a row of its 0 results rows");
}

TEST(WorkbenchChain, TwoTableMethodsAndTwoBudgetsAreRefusedInThePanelWithTheEnginesMessages)
{
    MainWindow window;
    chain_show_window(window);
    MethodPanel* panel = window.methodPanel();
    panel->setDimension(64);
    const ChainTextBoxesCleared cleared{panel}; // the bundled text: no file of another test's
    auto* method = panel->findChild<QComboBox*>();
    ASSERT_NE(method, nullptr);
    chain_key(method, Qt::Key_Home);
    const QString first = panel->method();
    panel->findChild<QPushButton*>("then")->click();
    auto* then_method = panel->findChild<QComboBox*>("then_method");
    chain_type_choice(then_method, "sv");
    ASSERT_EQ(panel->thenMethod(), "svd");
    // The engine's refusal of the request, word for word (what a JSON pipeline gets).
    std::string engine;
    try {
        embedlab::pipeline_from_json(Json::parse(R"({"model": "-", "pipeline": [{"method": ")" +
                                                 first.toStdString() + R"("}, {"method": "svd"}]})"));
    } catch (const embedlab::InputError& e) {
        engine = e.what();
    }
    ASSERT_FALSE(engine.empty());
    EXPECT_NE(engine.find(embedlab::second_method_refusal(first.toStdString(), "svd",
                                                          "the method's \"store\" field")),
              std::string::npos);
    EXPECT_EQ(panel->problem().toStdString(), engine);
    QLabel* problem = nullptr;
    for (auto* l : panel->findChildren<QLabel*>())
        if (l->text().startsWith("Not run"))
            problem = l;
    ASSERT_NE(problem, nullptr);
    EXPECT_TRUE(problem->isVisible());
    EXPECT_EQ(problem->text().toStdString(), "Not run: " + engine);
    // Run is refused, with the reason: no job.
    QString refused;
    QObject::connect(panel, &MethodPanel::runRefused, [&](const QString& why) { refused = why; });
    const size_t jobs_before = window.resultsView()->rows().size();
    panel->findChild<QPushButton*>("run")->click();
    EXPECT_EQ(refused.toStdString(), engine);
    EXPECT_TRUE(window.jobs().idle());
    EXPECT_EQ(window.resultsView()->rows().size(), jobs_before);

    // trim after a method: trim must come first, as the engine says.
    chain_type_choice(then_method, "tr");
    ASSERT_EQ(panel->thenMethod(), "trim");
    EXPECT_NE(panel->problem().toStdString().find("trim must be the first step"), std::string::npos)
        << panel->problem().toStdString();

    // trim first with both budgets (keep typed and committed with Tab): trim's own check.
    panel->findChild<QPushButton*>("remove_then")->click();
    chain_key(method, Qt::Key_End);
    ASSERT_EQ(panel->method(), "trim");
    auto* keep = chain_field<QSpinBox>(panel, "trim_page", "keep");
    ASSERT_NE(keep, nullptr);
    type_number(keep, "500");
    chain_key(keep, Qt::Key_Tab);
    EXPECT_EQ(keep->value(), 500);
    EXPECT_EQ(panel->problem().toStdString(), "trim: keep and coverage are two budgets; give one");
    // Coverage off (its box at 0 says so): keep alone is a budget.
    auto* coverage = chain_field<QDoubleSpinBox>(panel, "trim_page", "coverage");
    type_number(coverage, "0");
    chain_key(coverage, Qt::Key_Tab);
    EXPECT_EQ(coverage->value(), 0); // "Coverage = off"
    EXPECT_EQ(coverage->specialValueText(), "Coverage = off");
    EXPECT_EQ(panel->problem(), QString());
    EXPECT_EQ(panel->chainLabel().toStdString(), "trim keep 500");
}

namespace {

// The chain the remote and Slurm rows run: trim to 0.9 of the first slice's tokens, pca
// rank 16 stored as q8_0, evaluated on the second slice.
Json chain_request(const embedlab::test::TextSlices& texts)
{
    Json j = {{"model", embedlab::app::default_model()}, {"eval_text", texts.eval}};
    j["pipeline"] = Json::parse(R"([{"method": "trim", "coverage": 0.9}, {"method": "pca", "rank": 16,
                                   "store": "q8_0"}])");
    j["pipeline"][0]["freq_text"] = texts.fit;
    return j;
}

// A remote row against the local one: the same chain's numbers (sums over threads differ
// in the last digits between processes).
void expect_same_chain_row(const embedlab::RunSummary& remote, const embedlab::RunSummary& local,
                           const std::string& where)
{
    EXPECT_EQ(remote.method, "chain") << where;
    EXPECT_EQ(remote.parameters, local.parameters) << where;
    EXPECT_EQ(remote.params_before, local.params_before) << where;
    EXPECT_EQ(remote.params_after, local.params_after) << where;
    EXPECT_EQ(remote.bytes_after, local.bytes_after) << where;
    EXPECT_EQ(remote.model_bytes_after, local.model_bytes_after) << where;
    EXPECT_NEAR(remote.ppl, local.ppl, 1e-6 * local.ppl) << where;
    EXPECT_NEAR(remote.ppl_original, local.ppl_original, 1e-6 * local.ppl_original) << where;
}

} // namespace

TEST(WorkbenchChain, OnAnSshHostTheChainIsOneJobWithTheLocalRowsNumbers)
{
    auto& s = embedlab::test::shared_server();
    REQUIRE_SSHD(s);
    const embedlab::test::TempDir dir;
    const embedlab::test::TextSlices texts(20000, 3000);
    const Json pipeline = chain_request(texts);
    const embedlab::app::RunTarget target{.host = s.host(),
                                          .ssh_config = s.ssh_config.string(),
                                          .remote_cli = EMBEDLAB_CLI_PATH,
                                          .remote_dir = (dir / "remote").string()};
    const auto remote = embedlab::app::compress_chain_and_evaluate(pipeline, target);
    EXPECT_EQ(remote.host, s.host());
    expect_same_chain_row(remote, embedlab::app::compress_chain_and_evaluate(pipeline), "ssh");
    // A refused chain is refused here, before any ssh: the engine's message.
    Json two = pipeline;
    two["pipeline"][0] = {{"method", "svd"}, {"rank", 8}};
    EXPECT_THROW(embedlab::app::compress_chain_and_evaluate(two, target), embedlab::InputError);
}

TEST(WorkbenchChain, OnSlurmThePanelsChainIsOneArrayTask)
{
    const embedlab::test::FakeSlurm slurm;
    MainWindow window;
    chain_show_window(window);
    embedlab::test::open_bundled(window);
    MethodPanel* panel = window.methodPanel();
    const embedlab::test::TextSlices texts(20000, 3000);
    const ChainTextBoxesCleared cleared{panel};
    const auto target = panel->target();
    panel->setMethod("trim");
    panel->findChild<QLineEdit*>("freq_text")->setText(QString::fromStdString(texts.fit));
    panel->evaluationText()->setText(QString::fromStdString(texts.eval));
    chain_field<QDoubleSpinBox>(panel, "trim_page", "coverage")->setValue(0.9);
    panel->setThen("pca");
    chain_field<QSpinBox>(panel, "pca_page", "rank")->setValue(16);
    auto* store = chain_field<QComboBox>(panel, "pca_page", "store");
    store->setCurrentIndex(store->findData("q8_0"));
    panel->setTarget({.slurm = true});
    ASSERT_EQ(panel->problem(), QString());
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    panel->findChild<QPushButton*>("run")->click();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }, 60000));
    EXPECT_TRUE(failure.isEmpty()) << failure.toStdString();
    const std::string calls = embedlab::test::read_text(slurm.log());
    EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 1) << "one sbatch: " << calls;
    EXPECT_NE(calls.find("--array=0 "), std::string::npos) << calls;
    const auto& rows = window.resultsView()->rows();
    ASSERT_FALSE(rows.empty());
    expect_same_chain_row(rows.back(), embedlab::app::compress_chain_and_evaluate(chain_request(texts)),
                          "Slurm");
    panel->setThen({});
    panel->setMethod(MethodPanel::methods().front());
    panel->setTarget(target);
}
