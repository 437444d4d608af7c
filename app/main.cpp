// embedlab: the GUI. `embedlab [MODEL] [--screenshot FILE.png]` opens MODEL (default:
// the bundled model); --screenshot saves the window once the model is shown and
// analysed, then quits.
//
// libtorch stays out of this file: the engine is reached through model_summary.hpp.
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "main_window.hpp"

namespace embedlab {
void init_runtime();
void restart_with_passive_openmp(char** argv);
} // namespace embedlab

int main(int argc, char** argv)
{
    embedlab::restart_with_passive_openmp(argv); // before Qt starts threads
    QApplication app(argc, argv);
    QApplication::setApplicationName("EmbedLab");
    QApplication::setOrganizationName("EmbedLab");
    try {
        embedlab::init_runtime();
    } catch (const std::exception& e) { // EMBEDLAB_THREADS out of range: say so, as the CLI does
        std::fprintf(stderr, "embedlab: %s\n", e.what());
        return 2;
    }

    QCommandLineParser parser;
    parser.setApplicationDescription("EmbedLab: compress token embeddings of small language models");
    parser.addHelpOption();
    parser.addPositionalArgument("model", "Model directory, .gguf or llama2.c .bin (default: bundled)");
    QCommandLineOption screenshot("screenshot", "Save a PNG of the window once loaded, then quit.", "file");
    parser.addOption(screenshot);
    QCommandLineOption tab(
        "tab", "Open at this view: " + embedlab::app::MainWindow::viewNames().join(", ") + ".", "view");
    parser.addOption(tab);
    parser.process(app);

    embedlab::app::MainWindow window;
    const QStringList pos = parser.positionalArguments();
    const QString model = pos.isEmpty() ? QString::fromStdString(embedlab::app::default_model()) : pos[0];
    if (parser.isSet(screenshot)) {
        const QString file = parser.value(screenshot);
        // Once the model is shown and its analysis jobs are done.
        QObject::connect(&window, &embedlab::app::MainWindow::modelShown, &window, [&window, file](bool ok) {
            auto* poll = new QTimer(&window);
            QObject::connect(poll, &QTimer::timeout, &window, [&window, file, ok, poll] {
                if (!window.jobs().idle())
                    return;
                poll->stop();
                window.grab().save(file);
                QApplication::exit(ok ? 0 : 2);
            });
            poll->start(100);
        });
    }
    if (parser.isSet(tab) && !window.showView(parser.value(tab))) {
        std::fprintf(stderr, "embedlab: unknown view '%s' (%s)\n", qPrintable(parser.value(tab)),
                     qPrintable(embedlab::app::MainWindow::viewNames().join(", ")));
        return 2;
    }
    window.show();
    window.openModel(model);
    return app.exec();
}
