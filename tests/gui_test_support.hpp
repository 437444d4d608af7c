// Helpers for tests of Qt widgets (run with QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QAbstractItemModel>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QSettings>
#include <QStringList>
#include <QTemporaryDir>
#include <QTimer>
#include <QWidget>
#include <cmath>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "fourier_map_view.hpp"
#include "neighbour_graph_view.hpp"
#include "tensor_train_view.hpp"

// QtGui's own (what QTest::keyClick calls): the shortcut map's part of a key press.
bool qt_sendShortcutOverrideEvent(QObject* o, ulong timestamp, int k, Qt::KeyboardModifiers mods,
                                  const QString& text, bool autorep, ushort count);

namespace embedlab::test {

// A key pressed as a user presses it: the shortcut map first (the focused widget
// may claim the key with a ShortcutOverride), then the key to the widget.
inline void press_key(QWidget* widget, int key, Qt::KeyboardModifiers modifiers = Qt::NoModifier,
                      const QString& text = {})
{
    if (::qt_sendShortcutOverrideEvent(widget, 0, key, modifiers, text, false, 1))
        return; // a shortcut took it
    QKeyEvent press(QEvent::KeyPress, key, modifiers, text);
    QApplication::sendEvent(widget, &press);
    QKeyEvent release(QEvent::KeyRelease, key, modifiers, text);
    QApplication::sendEvent(widget, &release);
}

// Types `text` over the number in a spin box (focused, its number selected).
inline void type_number(QAbstractSpinBox* box, const QString& text)
{
    box->setFocus();
    box->selectAll();
    for (QChar c : text)
        press_key(box, c == '.' ? Qt::Key_Period : Qt::Key_0 + (c.unicode() - '0'), Qt::NoModifier,
                  QString(c));
}

// Runs the event loop (where jobs deliver) until `done()`, at most timeout_ms; its last answer.
template <class Done> bool wait_for(Done done, int timeout_ms = 120000)
{
    QElapsedTimer clock;
    clock.start();
    // The loop sleeps until an event; the tick bounds the sleep, so `done` and the
    // timeout are looked at every 10 ms. (processEvents(flags, 20) never sleeps: it
    // spun a core the engine's jobs needed.)
    QTimer tick;
    tick.start(10);
    while (!done() && clock.elapsed() < timeout_ms)
        QApplication::processEvents(QEventLoop::WaitForMoreEvents);
    return done();
}

// A press, moves through `path` (each segment in 4 steps), a release at its end: a user's drag.
inline void drag(QWidget* widget, const QVector<QPointF>& path)
{
    QMouseEvent press(QEvent::MouseButtonPress, path.front(), widget->mapToGlobal(path.front()),
                      Qt::LeftButton, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(widget, &press);
    for (int i = 1; i < path.size(); ++i)
        for (int s = 1; s <= 4; ++s) {
            const QPointF at = path[i - 1] + (path[i] - path[i - 1]) * (s / 4.0);
            QMouseEvent move(QEvent::MouseMove, at, widget->mapToGlobal(at), Qt::NoButton, Qt::LeftButton,
                             Qt::NoModifier);
            QApplication::sendEvent(widget, &move);
        }
    QMouseEvent release(QEvent::MouseButtonRelease, path.back(), widget->mapToGlobal(path.back()),
                        Qt::LeftButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(widget, &release);
    QApplication::processEvents();
}

// Every cell of a table or tree model as shown, row by row.
inline QVector<QStringList> model_text(const QAbstractItemModel* model)
{
    QVector<QStringList> lines;
    for (int r = 0; r < model->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < model->columnCount(); ++c)
            cells << model->index(r, c).data().toString();
        lines << cells;
    }
    return lines;
}

// A GUI test program's main: offscreen, its settings (recent models, geometry) in a
// temporary directory, never the user's.
inline int run_gui_tests(int argc, char** argv, const char* name)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QTemporaryDir settings;
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings.path());
    QApplication::setOrganizationName("EmbedLabTest");
    QApplication::setApplicationName(name);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

// Lays the widget out at a window's size, so pixels map to data as on screen.
inline void settle(QWidget& w)
{
    w.resize(1000, 700);
    w.setAttribute(Qt::WA_DontShowOnScreen);
    w.show();
    QApplication::processEvents();
    for (auto* plot : w.findChildren<QCustomPlot*>())
        plot->replot();
}

// Two Fourier maps over ids 100..100+count: T smooth in the id (neighbour cosine
// 0.99), "original" rough (neighbour cosine 0.1 - wobble * (p % 5)).
inline views::FourierMapData smooth_and_rough_maps(int count, int dim, double wobble = 0)
{
    views::FourierMapData d;
    d.first = 100;
    d.count = count;
    d.dim = dim;
    views::FourierMatrix t{"T", {}, {}}, original{"original", {}, {}};
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < dim; ++i) {
            t.values << std::sin((i / 2 + 1) * 3.14159 * p / count);
            original.values << ((p * 7 + i * 13) % 11 - 5) / 5.0;
        }
    for (int p = 0; p + 1 < count; ++p) {
        t.neighbour << 0.99;
        original.neighbour << 0.1 - wobble * (p % 5);
    }
    d.matrices = {t, original};
    return d;
}

// Six Tensor-Train candidates of a 1000 x 128 table: shapes 8x16 (0-2) and 4x4x8
// (3-5) at eps 0.1, 0.3, 0.5; the TT's energy 400 (1 - eps) of the original's
// 1000, the equal-size SVD's 500, no energy-model counts.
inline views::TensorTrainData tensor_train_candidates()
{
    views::TensorTrainData d;
    d.vocab = 1000;
    d.dim = 128;
    for (int s = 0; s < 2; ++s)
        for (double eps : {0.1, 0.3, 0.5})
            d.candidates.push_back({s == 0 ? "8x16" : "4x4x8", "1,4,1", eps, 0.5 - eps / 2,
                                    eps * 0.9 + 0.05 * s, 1 - eps / 3, 20, 1000.0, 400.0 * (1 - eps), 500.0});
    return d;
}

// V tokens on a spiral, the first C common; rare slot i's k neighbours are the
// common tokens i..i+k-1 (mod C), weights 1/k; cosines spread over 0.3..1.
inline views::NeighbourGraphData spiral_neighbour_graph(int V, int C, int k)
{
    views::NeighbourGraphData d;
    d.k = k;
    for (int id = 0; id < V; ++id) {
        const double a = id * 0.618 * 6.2832;
        const double r = id < C ? 10.0 : 8.0 * std::sqrt((id - C) / double(V - C));
        d.x << r * std::cos(a);
        d.y << r * std::sin(a);
        d.tokens << QString("tok%1").arg(id);
        (id < C ? d.common : d.rare) << id;
    }
    for (int i = 0; i < d.rare.size(); ++i) {
        for (int j = 0; j < k; ++j) {
            d.neighbours << (i + j) % C;
            d.weights << 1.0 / k;
        }
        d.cosine << 0.3 + 0.7 * (i % 100) / 100.0;
    }
    return d;
}

} // namespace embedlab::test
